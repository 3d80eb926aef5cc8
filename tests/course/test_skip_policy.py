"""A test may be skipped only for a reason on tests/conftest.py's list; any other skip fails the run."""

from pathlib import Path

pytest_plugins = ["pytester"]

CONFTEST = (Path(__file__).resolve().parents[1] / "conftest.py").read_text()


def test_stray_skip_fails_and_gpu_skip_states_its_reason(pytester):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(
        """
        import pytest

        def test_stray():
            pytest.skip("flaky on tuesdays")

        @pytest.mark.gpu
        def test_needs_gpu():
            pass
        """
    )
    result = pytester.runpytest("-p", "no:nbval", "-p", "no:cacheprovider", "-rs", "-o", "addopts=",
                                "-o", "markers=gpu: x")
    import torch

    if torch.cuda.is_available():
        result.assert_outcomes(failed=1, passed=1)
    else:
        result.assert_outcomes(failed=1, skipped=1)
        result.stdout.fnmatch_lines(["*needs a CUDA GPU*"])
    result.stdout.fnmatch_lines(["*skipped without an allowed reason*flaky on tuesdays*"])
