# solution: compile-pays
# fails: compile-pays-break-even compile-pays-decision
# says: compile time
# Typical mistake: the compile time left out, so compiling seems to pay from the first step.
import math
import statistics

def compile_pays(compile_s, eager_s, compiled_s, steps):
    eager, compiled = statistics.median(eager_s), statistics.median(compiled_s)
    saving = eager - compiled
    verdict = bench.compare(bench.Timing.from_times(compiled_s), bench.Timing.from_times(eager_s))
    faster = verdict.faster is verdict.a
    if not faster:
        return {"saving_s": saving, "faster": False, "break_even": None, "pays": False}
    return {"saving_s": saving, "faster": True, "break_even": 1, "pays": steps >= 1}
