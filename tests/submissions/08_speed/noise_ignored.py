# solution: compile-pays
# fails: compile-pays-noise
# says: within the noise
# Typical mistake: any positive saving taken as real, although the spreads overlap.
import math
import statistics

def compile_pays(compile_s, eager_s, compiled_s, steps):
    saving = statistics.median(eager_s) - statistics.median(compiled_s)
    if saving <= 0:
        return {"saving_s": saving, "faster": False, "break_even": None, "pays": False}
    break_even = math.floor(compile_s / saving) + 1
    return {"saving_s": saving, "faster": True, "break_even": break_even, "pays": steps >= break_even}
