# solution: profile-regions
# fails: profile-trace-names profile-slowest
# says: record_function
# times the regions with its own clock: the trace names none of them, and the answer is the clock's
def profile_regions(regions, trace_path):
    """Times each region with perf_counter; exports a trace without regions."""
    import time
    from torch.profiler import ProfilerActivity, profile

    seconds = {}
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for name, fn in regions.items():
            start = time.perf_counter()
            fn()
            seconds[name] = time.perf_counter() - start
    prof.export_chrome_trace(str(trace_path))
    return max(seconds, key=seconds.get)
