"""helpers.checks: failures are CheckFailed (an AssertionError) with a message a learner can act on."""

import time

import pytest
import torch

from helpers import checks
from helpers.checks import CheckFailed


def test_check_failed_is_an_assertion_error():
    assert issubclass(CheckFailed, AssertionError)
    with pytest.raises(CheckFailed, match="what to fix"):
        checks.check(False, "what to fix")
    checks.check(True, "never shown")


def test_check_equal_reports_got_expected_and_hint():
    with pytest.raises(CheckFailed, match=r"count: got 2; expected 11\. use numel"):
        checks.check_equal(2, 11, "count", "use numel")
    checks.check_equal(torch.ones(2), torch.ones(2), "same")
    with pytest.raises(CheckFailed, match="dtype=torch.float16"):
        checks.check_equal(torch.ones(2, dtype=torch.float16), torch.ones(2), "dtype differs")


def test_check_close_and_dtype_and_type():
    checks.check_close(torch.tensor([1.0]), torch.tensor([1.0 + 1e-7]), "close")
    with pytest.raises(CheckFailed, match="grad"):
        checks.check_close(torch.tensor([1.0]), torch.tensor([2.0]), "grad")
    with pytest.raises(CheckFailed, match="expected dtype torch.bfloat16"):
        checks.check_dtype(torch.ones(1), torch.bfloat16, "output")
    with pytest.raises(CheckFailed, match="not a tensor"):
        checks.check_dtype(1.0, torch.float32, "output")
    with pytest.raises(CheckFailed, match="got a str"):
        checks.check_type("cpu", torch.device, "device")


def test_check_raises():
    err = checks.check_raises(ValueError, lambda: int("x"), "parse")
    assert isinstance(err, ValueError)
    with pytest.raises(CheckFailed, match="got no exception"):
        checks.check_raises(ValueError, lambda: 1, "parse")
    with pytest.raises(CheckFailed, match="KeyError"):
        checks.check_raises(ValueError, lambda: {}["k"], "parse")


def test_solved_names_an_unwritten_stub():
    def time_on_device():
        raise NotImplementedError()

    with pytest.raises(CheckFailed, match="`time_on_device` is not written yet"):
        checks.solved(time_on_device)


def test_solved_keeps_torch_not_implemented_errors():
    def copies_meta():
        return torch.ones(1, device="meta").to("cpu")

    with pytest.raises(NotImplementedError):
        checks.solved(copies_meta)


def test_solved_explains_device_errors_and_passes_others_through():
    def hard_coded():
        torch.cuda.synchronize()  # on the laptop below, torch raises "Torch not compiled with CUDA enabled"

    with checks.cpu_only_machine(), pytest.raises(CheckFailed, match="hard-coding 'cuda'"):
        checks.solved(hard_coded)
    with pytest.raises(ZeroDivisionError):
        checks.solved(lambda: 1 / 0)
    assert checks.solved(lambda a, b=1: a + b, 1, b=2) == 3


def test_record_calls_logs_order_and_restores():
    original = time.perf_counter
    with checks.record_calls({"clock": (time, "perf_counter")}) as log:
        time.perf_counter()
        time.perf_counter()
    assert log.events == ["clock", "clock"] and log.count("clock") == 2
    assert time.perf_counter is original


def test_record_calls_restores_after_error():
    original = time.monotonic
    with pytest.raises(RuntimeError):
        with checks.record_calls({"clock": (time, "monotonic")}):
            raise RuntimeError("boom")
    assert time.monotonic is original


def test_fake_machine_restores_the_real_answers():
    real = (torch.cuda.is_available(), torch.cuda.device_count(), torch.backends.mps.is_available())
    with checks.fake_machine(cuda=3, mps=False):
        assert torch.cuda.is_available() and torch.cuda.device_count() == 3
        assert torch.accelerator.current_accelerator() == torch.device("cuda", 0)
    assert (torch.cuda.is_available(), torch.cuda.device_count(), torch.backends.mps.is_available()) == real


def test_fake_machine_answers_like_torch_about_the_build_and_the_device_index():
    with checks.fake_machine(cuda=2):
        assert torch.accelerator.current_device_index() == 0
        assert torch.accelerator.current_accelerator(check_available=True) == torch.device("cuda", 0)
        assert torch.backends.cuda.is_built()
    with checks.fake_machine():
        assert torch.accelerator.current_accelerator() is None
        with pytest.raises(RuntimeError, match="none is available"):
            torch.accelerator.current_device_index()
    # a CUDA wheel on a machine without a GPU: the build's accelerator is named, but is not available
    with checks.fake_machine(built_for="cuda"):
        assert torch.accelerator.current_accelerator().type == "cuda"
        assert torch.accelerator.current_accelerator(check_available=True) is None
        assert not torch.accelerator.is_available() and not torch.cuda.is_available()
        assert torch.backends.cuda.is_built() and torch.cuda.device_count() == 0


def test_passed_prints_a_tick(capsys):
    checks.passed("timer")
    assert "timer: all checks passed" in capsys.readouterr().out


def test_check_raises_does_not_mistake_a_stub_for_the_expected_error():
    def stub(*args):
        raise NotImplementedError()

    # NotImplementedError is a RuntimeError: without care an unsolved stub would pass check_raises(RuntimeError, ...)
    with pytest.raises(CheckFailed, match="not written yet"):
        checks.check_raises(RuntimeError, lambda: stub("cuda"), "choose_device('cuda')")
    with pytest.raises(CheckFailed, match="`stub` is not written yet"):
        checks.check_raises(RuntimeError, lambda: checks.solved(stub, "cuda"), "choose_device('cuda')")


def test_fake_machine_fakes_synchronisation_memory_and_properties_of_a_gpu():
    with checks.FakeMachine(cuda=1, gpu_memory=2**30).active():
        assert torch.cuda.synchronize() is None and torch.cuda.is_initialized()
        assert torch.cuda.mem_get_info() == (2**30, 2**30)
        props = torch.cuda.get_device_properties(0)
        assert props.total_memory == 2**30 and props.name == "Simulated GPU 0"
        assert torch.accelerator.synchronize() is None
        with pytest.raises(RuntimeError, match="MPS"):
            torch.mps.synchronize()
    with checks.fake_machine(mps=True):
        assert torch.mps.synchronize() is None and torch.accelerator.synchronize() is None
        assert not torch.cuda.is_initialized()


@pytest.mark.parametrize("machine, error, text", [
    (checks.FakeMachine(), AssertionError, "not compiled with CUDA"),
    (checks.FakeMachine(built_for="cuda"), RuntimeError, "No CUDA GPUs"),
])
def test_fake_machine_without_a_gpu_refuses_gpu_calls_as_torch_does(machine, error, text):
    with machine.active():
        assert not torch.cuda.is_initialized()
        for call in (torch.cuda.synchronize, torch.cuda.mem_get_info, lambda: torch.cuda.get_device_properties(0),
                     torch.cuda.current_device, lambda: torch.cuda.get_device_name(0)):
            with pytest.raises(error, match=text):
                call()
        with pytest.raises(RuntimeError, match="none is available"):
            torch.accelerator.synchronize()


def test_fake_machine_restores_everything_after_an_error():
    machine = checks.FakeMachine(cuda=2, mps=True)
    originals = [(owner, attr, getattr(owner, attr)) for owner, attr, _ in machine.changes() if hasattr(owner, attr)]
    real_is_available, real_sync = torch.cuda.is_available, torch.cuda.synchronize
    learner = {"is_available": real_is_available, "sync": real_sync}  # a learner's `from torch.cuda import ...`
    with pytest.raises(ZeroDivisionError):
        with machine.active(namespaces=[learner]):
            assert learner["is_available"]() and learner["sync"]() is None  # the learner's own names are faked too
            1 / 0
    assert all(getattr(owner, attr) is original for owner, attr, original in originals)
    assert learner == {"is_available": real_is_available, "sync": real_sync}
