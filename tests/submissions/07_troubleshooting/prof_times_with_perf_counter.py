# solution: profile-regions
# fails: profile-slowest
# says: Python clock
# profiles and exports as asked, but answers from time.perf_counter around each region, never reading the trace
import time


def profile_regions(regions, trace_path):
    """Regions under record_function, trace exported; the slowest by perf_counter."""
    from torch.profiler import ProfilerActivity, profile, record_function

    seconds = {}
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for name, fn in regions.items():
            with record_function(name):
                start = time.perf_counter()
                fn()
                seconds[name] = time.perf_counter() - start
    prof.export_chrome_trace(str(trace_path))
    return max(seconds, key=seconds.get)
