"""helpers.device: choosing, validating, moving and synchronising on any machine."""

import collections
import dataclasses

import pytest
import torch

from helpers import device as dev
from helpers.checks import fake_machine


def test_cpu_only_machine_picks_cpu(monkeypatch):
    monkeypatch.delenv(dev.DEVICE_ENV_VAR, raising=False)
    with fake_machine():
        assert dev.pick_device() == torch.device("cpu")
        assert dev.accelerator() is None
        assert dev.available_devices() == [torch.device("cpu")]


def test_cuda_preferred_then_mps(monkeypatch):
    monkeypatch.delenv(dev.DEVICE_ENV_VAR, raising=False)
    with fake_machine(cuda=2):
        assert dev.pick_device() == torch.device("cuda", 0)
        assert dev.available_devices() == [torch.device("cuda", 0), torch.device("cuda", 1), torch.device("cpu")]
    with fake_machine(mps=True):
        assert dev.pick_device() == torch.device("mps")


def test_explicit_request_beats_environment_variable(monkeypatch):
    monkeypatch.setenv(dev.DEVICE_ENV_VAR, "cuda:1")
    with fake_machine(cuda=2):
        assert dev.pick_device() == torch.device("cuda", 1)
        assert dev.pick_device("cpu") == torch.device("cpu")


@pytest.mark.parametrize("requested, env, current", [
    (None, "cuda:1", 1),  # README's COURSE_DEVICE=cuda:1
    ("cuda:1", None, 1),
    (torch.device("cuda", 1), "cuda:0", 1),
    (None, None, 0),  # the best GPU is the current one: it stays current
])
def test_a_chosen_gpu_becomes_the_current_one(monkeypatch, requested, env, current):
    """Finding 6: without set_device, torch.cuda.Stream(), Event.record() and synchronize() act on GPU 0."""
    from helpers.checks import record_calls

    if env is None:
        monkeypatch.delenv(dev.DEVICE_ENV_VAR, raising=False)
    else:
        monkeypatch.setenv(dev.DEVICE_ENV_VAR, env)
    with fake_machine(cuda=2), record_calls({"set_device": (torch.cuda, "set_device")}) as log:
        assert dev.pick_device(requested) == torch.device("cuda", current)
        assert torch.cuda.current_device() == current
        assert dev.accelerator() == torch.device("cuda", current)
    assert log.events == ["set_device"]


@pytest.mark.parametrize("requested, machine", [("cpu", {"cuda": 2}), ("cuda", {"cuda": 2}), (None, {}),
                                                ("mps", {"mps": True})])
def test_no_gpu_index_changes_no_current_gpu(monkeypatch, requested, machine):
    """The CPU, MPS, and a bare "cuda" (which already means the current GPU) leave the current GPU alone."""
    from helpers.checks import record_calls

    monkeypatch.delenv(dev.DEVICE_ENV_VAR, raising=False)
    with fake_machine(**machine), record_calls({"set_device": (torch.cuda, "set_device")}) as log:
        dev.pick_device(requested)
    assert log.events == []


def test_a_missing_gpu_changes_no_current_gpu(monkeypatch):
    from helpers.checks import record_calls

    monkeypatch.setenv(dev.DEVICE_ENV_VAR, "cuda:2")
    with fake_machine(cuda=2), record_calls({"set_device": (torch.cuda, "set_device")}) as log, \
            pytest.raises(dev.DeviceUnavailableError):
        dev.pick_device()
    assert log.events == []


def test_environment_variable_forces_cpu_on_a_gpu_machine(monkeypatch):
    monkeypatch.setenv(dev.DEVICE_ENV_VAR, "cpu")
    with fake_machine(cuda=1):
        assert dev.pick_device() == torch.device("cpu")


@pytest.mark.parametrize("request_, machine, fragment", [
    ("cuda", {}, "Devices available here: cpu"),
    ("cuda:3", {"cuda": 2}, "cuda:0 to cuda:1"),
    ("mps", {"cuda": 1}, "MPS"),
    ("tpu:0", {}, "not a device"),
])
def test_missing_device_fails_at_once_with_what_the_machine_has(request_, machine, fragment):
    with fake_machine(**machine), pytest.raises(dev.DeviceUnavailableError, match=fragment) as info:
        dev.pick_device(request_)
    assert isinstance(info.value, RuntimeError)


def test_missing_cuda_from_environment_variable_is_one_clear_error(monkeypatch):
    monkeypatch.setenv(dev.DEVICE_ENV_VAR, "cuda")
    with fake_machine(), pytest.raises(dev.DeviceUnavailableError, match="CPU-only build|no CUDA GPU"):
        dev.pick_device()


Pair = collections.namedtuple("Pair", "a b")


@dataclasses.dataclass
class Sample:
    image: torch.Tensor
    label: int
    extras: dict


def test_to_device_moves_every_tensor_and_keeps_structure():
    batch = {
        "pair": Pair(torch.ones(2), [torch.zeros(1), "text"]),
        "sample": Sample(torch.ones(3), 7, {"mask": (torch.ones(1),)}),
        "ordered": collections.OrderedDict(x=torch.ones(1)),
        "counts": collections.defaultdict(int, {"n": torch.ones(1)}),
        "none": None,
    }
    moved = dev.to_device(batch, "meta")
    assert type(moved["pair"]) is Pair and moved["pair"].a.device.type == "meta"
    assert moved["pair"].b[0].device.type == "meta" and moved["pair"].b[1] == "text"
    assert isinstance(moved["sample"], Sample) and moved["sample"].image.device.type == "meta"
    assert moved["sample"].label == 7 and moved["sample"].extras["mask"][0].device.type == "meta"
    assert type(moved["ordered"]) is collections.OrderedDict
    assert moved["counts"]["n"].device.type == "meta"
    assert moved["none"] is None
    assert batch["pair"].a.device.type == "cpu", "the input batch must not be modified"


def test_to_device_non_blocking_only_for_pinned_to_cuda(monkeypatch):
    calls = []
    original = torch.Tensor.to

    def spy(self, *args, **kwargs):
        calls.append(kwargs.get("non_blocking"))
        return original(self, "meta")

    monkeypatch.setattr(torch.Tensor, "to", spy)
    dev.to_device([torch.ones(1)], "cuda")
    dev.to_device([torch.ones(1)], "cpu", non_blocking=True)
    assert calls == [False, True]


def test_synchronize_is_safe_on_cpu_and_calls_cuda_on_cuda(monkeypatch):
    dev.synchronize("cpu")  # must not raise on a CPU-only build
    dev.synchronize(None)
    seen = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: seen.append(device))
    dev.synchronize("cuda:0")
    assert seen == [torch.device("cuda", 0)]


@pytest.mark.parametrize("message, fragment", [
    ("Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!", "move the input"),
    ("Tensor on device meta is not on the expected device cpu!", "move the input"),
    ("Torch not compiled with CUDA enabled", "hard-coding"),
    # a CUDA build of torch on a machine without a GPU (torch 2.11+cu130, read off `.cuda()` there)
    ("Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and installed a driver "
     "from http://www.nvidia.com/Download/index.aspx", "hard-coding"),
    ("No CUDA GPUs are available", "hard-coding"),
])
def test_explain_device_error(message, fragment):
    assert fragment in dev.explain_device_error(RuntimeError(message))


def test_explain_device_error_ignores_other_errors():
    assert dev.explain_device_error(ValueError("shapes do not match")) is None


@pytest.mark.gpu
def test_to_device_really_moves_to_cuda():
    moved = dev.to_device({"x": torch.ones(2).pin_memory()}, "cuda")
    dev.synchronize("cuda")
    assert moved["x"].is_cuda


@pytest.mark.parametrize("machine, waits_on", [
    ({"cuda": 1}, "cuda"),
    ({"mps": True}, "mps"),
    ({}, None),
])
def test_synchronize_waits_on_the_machine_s_accelerator_and_is_safe_without_one(machine, waits_on):
    from helpers.checks import record_calls

    spies = {"cuda": (torch.cuda, "synchronize"), "mps": (torch.mps, "synchronize")}
    with fake_machine(**machine), record_calls(spies) as log:
        dev.synchronize()
    assert log.events == ([waits_on] if waits_on else [])
