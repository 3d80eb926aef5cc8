# solution: profile-regions
# fails: profile-slowest
# says: alphabetical
# max(totals) compares the names, not the durations
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
    totals = {name: 0.0 for name in regions}
    for event in events:
        if event.get("cat") == "user_annotation" and event.get("name") in totals:
            totals[event["name"]] += event.get("dur", 0)
    return max(totals)
