# solution: compile-pays
# fails:
# says:
# Correct, written differently: the break-even found by counting steps, as a float; `faster` read from the verdict's labels.
import math
import statistics

def compile_pays(compile_s, eager_s, compiled_s, steps):
    compiled = statistics.median(compiled_s)
    eager = statistics.median(eager_s)
    report = bench.compare(bench.Timing.from_times(compiled_s, label="c"), bench.Timing.from_times(eager_s, label="e"))
    result = {"saving_s": eager - compiled, "faster": bool(report.faster is not None and report.faster.label == "c"),
              "break_even": None, "pays": False}
    if result["faster"]:
        n = 1.0
        while compile_s + n * compiled >= n * eager:
            n += 1
        result["break_even"], result["pays"] = n, steps >= n
    return result
