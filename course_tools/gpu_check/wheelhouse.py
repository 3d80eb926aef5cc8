"""``make gpu-wheelhouse``: the wheels ``make gpu-check`` needs on a GPU machine that cannot reach an index.

The GPU machine the course is checked on brings Python 3.12, torch with CUDA, pytest, matplotlib, tqdm,
tensorboard and nvidia-ml-py, but nothing that runs a notebook (no jupyter, ipykernel, nbclient, nbformat,
nbval). This downloads those for Python 3.12 on manylinux x86-64, with every dependency, then drops the
wheels of projects that machine already has (:data:`DEVICE_HAS`), so what travels stays small. Only the
working tree travels there, so the folder (``.whl`` by default) is ignored by git and carried explicitly.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

#: What the GPU check runs that the GPU machine lacks (its tests import nbformat; nbval runs the notebooks).
NEEDED = ("nbval", "nbclient", "nbformat", "ipykernel", "jupyter_client")
PYTHON_VERSION = "3.12"
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64",
             "manylinux1_x86_64", "manylinux_2_24_x86_64", "manylinux_2_31_x86_64", "manylinux_2_34_x86_64")
#: Projects the GPU machine's image already holds (its package list as read on 2026-11-17): not downloaded.
DEVICE_HAS = frozenset("""
absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs botorch build certifi
charset-normalizer chex click cloudpickle cmake colorama contourpy coverage cuda-bindings cuda-core cuda-pathfinder
cuda-toolkit cupy-cuda13x cycler cython diffrax e3nn einops equinox etils execnet filelock flatbuffers flax fonttools
formulaic frozenlist fsspec gpytorch grpcio h11 h5py hf-xet httpcore httpx huggingface-hub humanize hypothesis idna
imageio iniconfig interface-meta jax jax-cuda13-pjrt jax-cuda13-plugin jaxlib jaxtyping jinja2 joblib kiwisolver
lazy-loader lightning lightning-utilities linear-operator lineax llvmlite lxml markdown markdown-it-py markupsafe
matplotlib mdurl meson ml-dtypes mpi4py mpmath msgpack multidict multipledispatch mypy-extensions nanobind narwhals
networkx ninja numba numba-cuda numpy numpyro nvidia-cublas nvidia-cuda-cupti nvidia-cuda-nvrtc nvidia-cuda-runtime
nvidia-cudnn-cu13 nvidia-cufft nvidia-cufile nvidia-curand nvidia-cusolver nvidia-cusparse nvidia-cusparselt-cu13
nvidia-ml-py nvidia-nccl-cu13 nvidia-nvjitlink nvidia-nvshmem-cu13 nvidia-nvtx onnx onnx-ir onnxruntime onnxscript
opencv-python-headless optax opt-einsum opt-einsum-fx optimistix orbax-checkpoint packaging pandas pathspec patsy
peft pillow pip pluggy portalocker prometheus-client propcache protobuf psutil pyarrow pybind11 py-cpuinfo pygments
pyparsing pyproject-hooks pyre-extensions pytest pytest-benchmark pytest-cov pytest-mock pytest-timeout pytest-xdist
python-dateutil pytorch-lightning pyyaml regex requests rich sacrebleu safetensors scikit-build-core scikit-image
scikit-learn scipy seaborn sentencepiece sentence-transformers setuptools shellingham simplejson six sortedcontainers
statsmodels sympy tabulate tensorboard tensorboard-data-server tensorstore threadpoolctl tifffile tiktoken timm
tokenizers toolz torch torchaudio torchdiffeq torch-geometric torchmetrics torchvision tqdm transformers treescope
triton typer typing-extensions typing-inspect urllib3 uvloop wadler-lindig werkzeug wheel wrapt xarray xxhash yarl zipp
""".split())


def project_of(wheel: Path) -> str:
    """``jupyter_client-8.6.3-py3-none-any.whl`` -> ``jupyter-client`` (PEP 503 normalised)."""
    return re.sub(r"[-_.]+", "-", wheel.name.split("-")[0]).lower()


def download_command(dest: Path, python: str = sys.executable) -> list[str]:
    """The pip command that fetches :data:`NEEDED` and their dependencies for the GPU machine."""
    platforms = [arg for p in PLATFORMS for arg in ("--platform", p)]
    return [python, "-m", "pip", "download", "--quiet", "--only-binary=:all:", "--python-version", PYTHON_VERSION,
            "--implementation", "cp", *platforms, "-d", str(dest), *NEEDED]


def prune(dest: Path) -> list[Path]:
    """Delete the wheels of projects the GPU machine already has; return what was deleted."""
    dropped = [w for w in sorted(dest.glob("*.whl")) if project_of(w) in DEVICE_HAS]
    for w in dropped:
        w.unlink()
    return dropped


def build(dest: Path) -> int:
    """Fill ``dest`` with the wheels, print what it holds and its size; the exit status of pip or 0."""
    dest.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(download_command(dest))
    if done.returncode:
        print(f"error: pip could not download the GPU check's wheels into {dest} (exit {done.returncode})",
              file=sys.stderr)
        return done.returncode
    dropped = prune(dest)
    wheels = sorted(dest.glob("*.whl"))
    size = sum(w.stat().st_size for w in wheels)
    print(f"{dest}: {len(wheels)} wheels, {size / 2**20:.1f} MiB (left out {len(dropped)} the GPU machine has):")
    print("  " + " ".join(project_of(w) for w in wheels))
    return 0
