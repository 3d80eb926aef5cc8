# solution: profile-regions
# fails: 
# says: 
# correct, written differently: pathlib, defaultdict, filtered by name
def profile_regions(regions, trace_path):
    """record_function per region; the trace summed per name with a defaultdict."""
    import json
    from collections import defaultdict
    from pathlib import Path

    from torch.profiler import ProfilerActivity, profile, record_function

    prof = profile(activities=[ProfilerActivity.CPU])
    prof.start()
    for name in regions:
        with record_function(name):
            regions[name]()
    prof.stop()
    prof.export_chrome_trace(str(trace_path))
    totals = defaultdict(float)
    for event in json.loads(Path(trace_path).read_text())["traceEvents"]:
        if event.get("name") in regions and event.get("ph") == "X":
            totals[event["name"]] += event["dur"]
    return sorted(totals.items(), key=lambda kv: kv[1])[-1][0]
