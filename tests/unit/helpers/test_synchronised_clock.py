"""W1 (GPU review 3): a clock that synchronises a GPU costs microseconds, and time_callable must still measure a spread.

On a GPU ``bench.sync_timer`` synchronises the device before every read, which costs 3-10 us. torch's
``blocked_autorange`` grows its block until that is 1e-4 of it, 10x at a time, so it measured one block at
every size chapter 01 sweeps: no spread, "too few repeats", no peak and no crossover. Here the device is a
stand-in: ``pick_device`` answers ``cuda`` and its ``synchronize`` spins 5 us (the issue's probe), the work
is real CPU work of the durations chapter 01's sweep has on an H100 (6 us to 1.5 ms).
"""

from __future__ import annotations

import time

import pytest
import torch

from helpers import benchmark as bench

SYNC_COST = 5e-6  # seconds: a synchronize of an idle GPU (torch's Timer docstring: "single to low double digit us")


def spin(seconds: float):
    """A call that takes ``seconds`` of host time, whatever the machine: the GPU work it stands for."""
    def call() -> None:
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            pass
    return call


@pytest.fixture
def costly_sync(monkeypatch):
    """A machine whose device is 'cuda' and whose synchronize costs SYNC_COST; counts the synchronisations."""
    calls = []
    monkeypatch.setattr(bench, "pick_device", lambda device=None: torch.device("cuda"))
    monkeypatch.setattr(bench, "synchronize", lambda device=None: (calls.append(device), spin(SYNC_COST)()))
    return calls


@pytest.mark.parametrize("call_s", [6e-6, 20e-6, 100e-6, 1.5e-3], ids=["6us", "20us", "100us", "1.5ms"])
def test_a_clock_that_costs_5us_still_gives_a_spread_at_every_size_chapter_01_sweeps(costly_sync, call_s):
    timing = bench.time_callable(spin(call_s), "cuda", min_run_time=0.04, warn=False)  # chapter 01's sweep
    assert len(timing.times) >= bench.MIN_BLOCKS, f"{len(timing.times)} repeat(s) of a {call_s * 1e6:.0f} us call"
    assert timing.iqr > 0, "the spread of real repeats is never exactly 0"
    assert timing.median >= call_s, "a call cannot take less than its own work"
    assert costly_sync, "the clock synchronised the device"


def test_the_clock_cost_is_a_small_share_of_each_block(costly_sync):
    """Judged on the calls' own work (their measured time grows on a loaded machine), with 5x slack for the load."""
    timing = bench.time_callable(spin(6e-6), "cuda", min_run_time=0.04, warn=False)
    block = 6e-6 * timing.number_per_run
    assert SYNC_COST / block <= 5 * bench.CLOCK_SHARE, f"a block of {block * 1e6:.0f} us of work against a 5 us clock"


def test_with_max_run_time_it_measures_until_steady_but_never_past_the_cap(costly_sync):
    timing = bench.time_callable(spin(50e-6), "cuda", min_run_time=0.02, max_run_time=0.2, warn=False)
    assert len(timing.times) >= bench.MIN_BLOCKS
    assert sum(timing.times) * timing.number_per_run < 0.2 + 0.1, "the cap holds, give or take the last block"


def test_torchs_own_block_choice_gives_one_block_against_such_a_clock():
    """The fault itself, kept visible: if torch ever changes its rule, this says the workaround may go."""
    clock_cost = spin(SYNC_COST)

    def clock() -> float:
        clock_cost()
        return time.perf_counter()

    timer = bench.torch_benchmark.Timer("fn()", globals={"fn": spin(20e-6)}, timer=clock)
    assert len(timer.blocked_autorange(min_run_time=0.04).times) < bench.MIN_BLOCKS
