# solution: compile-pays
# fails: compile-pays-noise
# says: a fixed threshold of your own
# Typical mistake: a cautious home-made rule, "faster only when it saves at least 15 %": an 11 % gap between tight
# repeats is beyond the noise by the course's rule, and this rule misses it.
import math
import statistics

def compile_pays(compile_s, eager_s, compiled_s, steps):
    eager, compiled = statistics.median(eager_s), statistics.median(compiled_s)
    saving = eager - compiled
    if saving < 0.15 * eager:
        return {"saving_s": saving, "faster": False, "break_even": None, "pays": False}
    break_even = math.floor(compile_s / saving) + 1
    return {"saving_s": saving, "faster": True, "break_even": break_even, "pays": steps >= break_even}
