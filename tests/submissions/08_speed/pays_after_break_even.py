# solution: compile-pays
# fails: compile-pays-decision
# says: steps >= break_even
# Typical mistake: pays only after the break-even step, not from it.
import math
import statistics

def compile_pays(compile_s, eager_s, compiled_s, steps):
    eager, compiled = statistics.median(eager_s), statistics.median(compiled_s)
    saving = eager - compiled
    verdict = bench.compare(bench.Timing.from_times(compiled_s), bench.Timing.from_times(eager_s))
    faster = verdict.faster is verdict.a
    if not faster:
        return {"saving_s": saving, "faster": False, "break_even": None, "pays": False}
    break_even = math.floor(compile_s / saving) + 1
    return {"saving_s": saving, "faster": True, "break_even": break_even, "pays": steps > break_even}
