# solution: profile-regions
# fails: profile-trace-names profile-slowest
# says: write it yourself
# profiles by hand, then reads the trace with the course's slowest_region
def profile_regions(regions, trace_path):
    """Profile each region under record_function(name), export a Chrome trace, return the slowest region's name."""
    import json
    from torch.profiler import ProfilerActivity, profile, record_function

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for name, fn in regions.items():
            with record_function(name):
                fn()
    prof.export_chrome_trace(str(trace_path))
    from helpers.troubleshoot import slowest_region

    return slowest_region(trace_path, list(regions))
