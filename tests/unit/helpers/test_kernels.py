"""helpers.kernels: a Triton kernel runs compiled on a GPU, interpreted on a CPU, says why where Triton is missing."""

import builtins
import os

import pytest
import torch

from helpers import kernels


@pytest.fixture
def interpret_var(monkeypatch):
    """TRITON_INTERPRET put back after the test: setup() sets it for the whole process."""
    monkeypatch.delenv(kernels.INTERPRET_VAR, raising=False)
    return monkeypatch


@pytest.fixture
def no_triton(monkeypatch):
    """``import triton`` fails, as on macOS or Windows, where Triton ships no wheel."""
    real_import = builtins.__import__

    def refuse(name, *args, **kwargs):
        if name == "triton" or name.startswith("triton."):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", refuse)


def test_on_a_cpu_kernels_are_interpreted_on_the_cpu():
    pytest.importorskip("triton")
    state = kernels.status("cpu")
    assert state.mode == "interpreted" and state.runs
    assert state.device == torch.device("cpu")
    assert "interpreter" in state.reason


def test_a_cuda_device_without_a_real_driver_is_interpreted_and_says_so(monkeypatch):
    """The simulated GPU: torch says CUDA is there, Triton's driver finds nothing to compile for."""
    triton = pytest.importorskip("triton")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))

    def no_driver():
        raise RuntimeError("0 active drivers ([]). There should only be one.")

    monkeypatch.setattr(type(triton.runtime.driver), "active", property(lambda self: no_driver()))
    state = kernels.status("cuda")
    assert state.mode == "interpreted" and state.device == torch.device("cpu")
    assert "no real GPU driver" in state.reason


def test_an_old_gpu_is_interpreted_with_its_capability_named(monkeypatch):
    pytest.importorskip("triton")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (6, 1))
    state = kernels.status("cuda")
    assert state.mode == "interpreted" and "6.1" in state.reason


def test_without_triton_the_status_is_missing_and_says_what_is_skipped(no_triton):
    state = kernels.status("cpu")
    assert state.mode == "missing" and not state.runs
    assert "Linux on x86-64" in state.reason and "rest of the chapter runs" in state.reason


def test_without_triton_a_kernel_is_defined_and_launching_it_says_why(no_triton):
    triton, tl, state = kernels.setup("cpu")
    assert state.mode == "missing"

    @triton.jit
    def add(x_ptr, n, BLOCK: tl.constexpr):  # the annotation is evaluated here, and must not fail
        tl.store(x_ptr + tl.arange(0, BLOCK), tl.load(x_ptr), mask=tl.arange(0, BLOCK) < n)

    @triton.jit(debug=True)
    def other(x_ptr):
        pass

    assert add.__name__ == "add"
    for launch in (lambda: add[(triton.cdiv(10, 4),)](None, 10, BLOCK=4), lambda: add(None, 10, 4), lambda: other()):
        with pytest.raises(kernels.TritonMissing, match="not installed") as caught:
            launch()
        assert isinstance(caught.value, RuntimeError)
    assert "add cannot run" in str(pytest.raises(kernels.TritonMissing, add).value)


def test_the_stand_ins_arithmetic_is_tritons():
    triton = pytest.importorskip("triton")
    stand_in = kernels._MissingTriton("missing")
    for n in range(0, 70):
        assert stand_in.next_power_of_2(n) == triton.next_power_of_2(n), n
        for block in (1, 4, 64):
            assert stand_in.cdiv(n, block) == triton.cdiv(n, block), (n, block)


def test_a_masked_vector_add_through_setup_matches_torch_on_a_ragged_length(interpret_var):
    pytest.importorskip("triton")
    triton, tl, state = kernels.setup("cpu")
    assert os.environ[kernels.INTERPRET_VAR] == "1" and state.mode == "interpreted"

    @triton.jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask),
                 mask=mask)

    n, block = 1000, 128  # 1000 is no multiple of 128: the last block is masked
    x, y = torch.randn(n), torch.randn(n)
    out = torch.full((n + 8,), -7.0)  # past n, nothing may be written
    add_kernel[(triton.cdiv(n, block),)](x, y, out, n, BLOCK=block)
    torch.testing.assert_close(out[:n], x + y)
    assert torch.all(out[n:] == -7.0)


def test_generated_code_shows_the_kernel_inductor_writes_on_a_cpu():
    from helpers.speed import compiler_missing

    if compiler_missing("cpu") is not None:
        pytest.skip(compiler_missing("cpu"))
    x = torch.randn(16, 16)
    code = kernels.generated_code(lambda a: torch.relu(a * 2 + 1), x)
    assert code.startswith("# cpp_fused_")  # the kernel, headed by its name
    assert "async_compile" not in code and "def call(" not in code  # the plumbing around it is cut


def test_generated_code_is_none_where_no_compiler_can_run(monkeypatch):
    monkeypatch.setattr(kernels, "compiler_missing", lambda device: "no C++ compiler")
    assert kernels.generated_code(lambda a: a + 1, torch.ones(3)) is None


def test_triton_languages_own_functions_run_interpreted_though_triton_was_imported_first(interpret_var):
    """torch._dynamo imports triton long before a chapter's setup cell; tl.max and tl.sum (themselves @triton.jit
    functions, decorated at that import) must still run inside an interpreted kernel."""
    pytest.importorskip("triton")
    import triton.language as tl_before  # imported without TRITON_INTERPRET, as torch._dynamo does
    from triton.runtime.jit import JITFunction

    interpret_var.delenv(kernels.INTERPRET_VAR, raising=False)
    kernels._language_as(interpreted=False)  # the state a compiled-mode import leaves
    assert type(tl_before.max) is JITFunction
    triton, tl, state = kernels.setup("cpu")
    assert state.mode == "interpreted" and type(tl.max) is not JITFunction

    @triton.jit
    def row_max_sum(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offsets = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offsets, mask=offsets < n, other=-float("inf"))
        tl.store(out_ptr, tl.max(x, axis=0) + tl.sum(tl.exp(x - tl.max(x, axis=0)), axis=0))

    x, out = torch.randn(37), torch.empty(1)
    row_max_sum[(1,)](x, out, 37, BLOCK=64)
    torch.testing.assert_close(out[0], x.max() + torch.exp(x - x.max()).sum())
