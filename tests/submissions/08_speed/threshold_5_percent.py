# solution: compile-pays
# fails: compile-pays-noise
# says: within the noise
# Typical mistake: a home-made rule, "compiled is faster when it saves at least 5 %", instead of the course's
# noise rule: a 7 % gap between tight repeats is still inside the noise bands.
import math
import statistics

def compile_pays(compile_s, eager_s, compiled_s, steps):
    eager, compiled = statistics.median(eager_s), statistics.median(compiled_s)
    saving = eager - compiled
    if saving < 0.05 * eager:
        return {"saving_s": saving, "faster": False, "break_even": None, "pays": False}
    break_even = math.floor(compile_s / saving) + 1
    return {"saving_s": saving, "faster": True, "break_even": break_even, "pays": steps >= break_even}
