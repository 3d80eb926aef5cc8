"""Chapter 07's profiler cells on CUDA, run here with the profile stood in for (CUPTI needs a real GPU)."""

import contextlib
import io
import json
import types

from support.layout import load, solution_path
from helpers.i18n import tr  # the chapter's cells print through it (its opening cell imports it)


def _cell(nb, cell_id):
    (source,) = [c.source for c in nb.cells if c.get("id") == cell_id]
    return source


def test_on_a_gpu_each_region_gets_the_kernels_launched_in_it_from_any_thread(tmp_path, monkeypatch):
    """gpu-review-2 finding 1: backward's kernels, launched on autograd's device thread, are backward's."""
    from helpers import troubleshoot as ts

    main, autograd_thread = 1, 2

    def x(name, cat, ts_, dur, tid=main, corr=None):
        return {"name": name, "cat": cat, "ph": "X", "ts": ts_, "dur": dur, "tid": tid,
                **({"args": {"correlation": corr}} if corr is not None else {})}

    trace = {"traceEvents": [
        x("forward", "user_annotation", 0, 100), x("cudaLaunchKernel", "cuda_runtime", 10, 5, corr=1),
        x("sgemm", "kernel", 20, 40, tid=7, corr=1),
        x("backward", "user_annotation", 100, 200), x("cudaLaunchKernel", "cuda_runtime", 110, 5, corr=2),
        x("fill", "kernel", 120, 2, tid=7, corr=2),
        x("cudaLaunchKernel", "cuda_runtime", 150, 5, tid=autograd_thread, corr=3),
        x("sgemm", "kernel", 160, 120, tid=7, corr=3),
        x("optimizer_step", "user_annotation", 300, 50), x("cudaLaunchKernel", "cuda_runtime", 310, 5, corr=4),
        x("sgd", "kernel", 320, 10, tid=7, corr=4)]}

    def event(key, cpu, own, device_us):
        return types.SimpleNamespace(key=key, cpu_time_total=cpu, self_cpu_time_total=own, device_time_total=device_us)

    class Averages(list):
        def table(self, **kwargs):
            return f"(table sorted by {kwargs['sort_by']})"

    averages = Averages([event("forward", 100, 30, 40), event("backward", 200, 190, 2),  # the column: its thread only
                         event("optimizer_step", 50, 20, 10), event("aten::mm", 40, 40, 160)])
    prof = types.SimpleNamespace(key_averages=lambda: averages,
                                 export_chrome_trace=lambda path: open(path, "w").write(json.dumps(trace)))
    monkeypatch.setenv("COURSE_RUNS", str(tmp_path))
    namespace = {"tr": tr, "ts": ts, "prof": prof, "profiled_gpu": True}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(_cell(load(solution_path("07_troubleshooting")), "ch07-37b"), "<cell>", "exec"), namespace)  # noqa: S102
    printed = out.getvalue()
    assert "(table sorted by self_device_time_total)" in printed
    assert ("region backward        CPU total   0.200 ms, self   0.190 ms (95% of its total is its own); the kernels "
            "launched in it ran   0.122 ms on the GPU (the table's device column, its own thread only:   0.002 ms)") in printed
    assert "region forward" in printed and "ran   0.040 ms on the GPU" in printed
    assert "ran   0.010 ms on the GPU" in printed  # optimizer_step
