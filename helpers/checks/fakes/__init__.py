"""Fakes: the stand-ins checks grade with, so a verdict needs no GPU, no real timing and no luck.

A fake answers what the learner's code asks (how many GPUs, what the clock
says, how long the work took) with what the check chose, and records what
the code did, so a verdict is decided from that record. Every fake goes
through the one patching utility (:func:`helpers.checks.patching.patched`)
and is built on the one fake machine:

* :mod:`~helpers.checks.fakes.machine`: :class:`FakeMachine`, what torch
  reports about CUDA, MPS and the accelerator;
* :mod:`~helpers.checks.fakes.simulated_gpu`: :class:`SimulatedDevice`, a
  GPU on a virtual clock whose work finishes only when it is synchronised,
  with its events and its stream (chapter 01's timer);
* :mod:`~helpers.checks.fakes.comparison`: :class:`FakeComparison`, injected
  timings for a CPU-vs-accelerator comparison (chapter 01's sweep).

Fakes hold no verdicts: what a record means for the learner is the chapter
module's (``helpers.checks.chNN``) to say.
"""

from helpers.checks.fakes.machine import FakeMachine, cpu_only_machine, fake_machine

__all__ = ["FakeMachine", "cpu_only_machine", "fake_machine"]
