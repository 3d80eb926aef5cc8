"""``make gpu-sim``: every chapter and every ``measure_*`` on a simulated H100 and T4 (issue 44).

The fake CUDA machine with a timing profile (:mod:`support.gpu_model`) keeps GPU-like time, so what the course
*concludes* on a GPU can be checked without one: chapter 01 finds a peak and a crossover, chapter 05 a verdict,
chapter 08 and 09 their conclusions, and no measurement ends with "too few repeats" where a GPU would have
enough. :mod:`support.gpu_sim` runs each chapter in a fresh Python and says what differs from a GPU. The planted
regressions at the end prove this can fail: W1's fix reverted, or a synchronize made free again.
"""

from __future__ import annotations

import pytest

from conftest import CUDA_BUILD_SKIP_REASON
from course_tools.gpu_check.measure import MEASURES
from support import fake_cuda as fc
from support import gpu_sim
from support.layout import chapters

pytestmark = pytest.mark.skipif(not fc.cuda_build(), reason=f"{CUDA_BUILD_SKIP_REASON}; `make gpu-sim` runs these")

PROFILES = ["H100", "T4"]
#: every measure_* make gpu-check runs (measure_07's device-side assert needs a child process: it stops, as said)
MEASURED = list(MEASURES)


def _report(problems: list[str], what: str) -> str:
    return f"{what}: what a GPU would print differently:\n- " + "\n- ".join(problems)


@pytest.mark.parametrize("profile", PROFILES)
def test_the_simulated_gpu_keeps_gpu_like_time(profile):
    report = gpu_sim.apart("model", "-", profile)
    problems = gpu_sim.model_problems(report)
    assert not problems, _report(problems, f"the simulated {profile}")


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("chapter", chapters())  # the chapter first in the id: one xdist scope per chapter
def test_every_chapter_concludes_on_a_simulated_gpu_as_on_a_real_one(chapter, profile):
    cells = gpu_sim.apart("chapter", chapter, profile)
    assert cells, f"{chapter} ran no cell"
    problems = gpu_sim.chapter_problems(chapter, profile, cells)
    assert not problems, _report(problems, f"{chapter} on the simulated {profile}")


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("chapter", MEASURED)
def test_every_gpu_check_measurement_measures_on_a_simulated_gpu(chapter, profile):
    report = gpu_sim.apart("measure", chapter, profile)
    problems = gpu_sim.measure_problems(chapter, profile, report)
    assert not problems, _report(problems, f"measure_{chapter[:2]} on the simulated {profile}")


@pytest.mark.parametrize("profile", PROFILES)
def test_chapter_09s_ladder_concludes_on_a_simulated_gpu(profile):
    """The chapter's cell stops at its loader's worker processes on the fake machine; this climbs it in-process."""
    rungs = gpu_sim.apart("ladder", "-", profile)
    problems = gpu_sim.ladder_problems(profile, rungs)
    assert not problems, _report(problems, f"chapter 09's ladder on the simulated {profile}")


# --------------------------------------------------------------------------- it can fail


def test_w1_reverted_fails_chapter_01s_measurement():
    """torch's own block choice back in time_callable: one block per GPU measurement, so no peak, no crossover.

    measure_01 runs the chapter's sweep with the chapter's rules (the chapter itself takes a minute this way)."""
    report = gpu_sim.apart("measure", "01_why_gpus", "H100", plant="w1_reverted")
    problems = gpu_sim.measure_problems("01_why_gpus", "H100", report)
    assert any("crossover_n" in p for p in problems) and any("gpu_matmul_best" in p for p in problems), report


def test_a_free_synchronize_fails_the_simulated_gpu():
    report = gpu_sim.apart("model", "-", "H100", plant="free_sync")
    assert any("synchronize" in p for p in gpu_sim.model_problems(report)), report
