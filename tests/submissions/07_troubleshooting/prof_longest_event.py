# solution: profile-regions
# fails: profile-slowest
# says: not one of the regions
# the longest event of the whole trace, whatever it is
def profile_regions(regions, trace_path):
    """Profile each region under record_function(name), export a Chrome trace, return the slowest region's name."""
    import json
    from torch.profiler import ProfilerActivity, profile, record_function

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for name, fn in regions.items():
            with record_function(name):
                fn()
    prof.export_chrome_trace(str(trace_path))
    with open(trace_path) as f:
        events = json.load(f)["traceEvents"]
    longest = max((e for e in events if "dur" in e), key=lambda e: e["dur"])
    return longest["name"]
