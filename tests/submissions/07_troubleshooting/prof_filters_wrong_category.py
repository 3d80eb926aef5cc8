# solution: profile-regions
# fails: profile-trace-names profile-slowest
# says: empty collection
# keeps only 'cpu_op' events, whose names are operators: no region is found and max() gets an empty dict
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
    totals = {}
    for event in events:
        if event.get("cat") == "cpu_op" and event.get("name") in regions:
            totals[event["name"]] = totals.get(event["name"], 0) + event.get("dur", 0)
    return max(totals, key=totals.get)
