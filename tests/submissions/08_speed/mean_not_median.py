# solution: compile-pays
# fails: compile-pays-break-even compile-pays-noise
# says: mean
# Typical mistake: means instead of medians: one slow repeat moves the saving and the break-even.
import math
import statistics

def compile_pays(compile_s, eager_s, compiled_s, steps):
    saving = statistics.fmean(eager_s) - statistics.fmean(compiled_s)
    verdict = bench.compare(bench.Timing.from_times(compiled_s), bench.Timing.from_times(eager_s))
    if verdict.faster is not verdict.a:
        return {"saving_s": saving, "faster": False, "break_even": None, "pays": False}
    break_even = math.floor(compile_s / saving) + 1
    return {"saving_s": saving, "faster": True, "break_even": break_even, "pays": steps >= break_even}
