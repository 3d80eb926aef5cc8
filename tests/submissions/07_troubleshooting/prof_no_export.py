# solution: profile-regions
# fails: profile-trace-names
# says: no trace file
# reads key_averages and never writes the trace
def profile_regions(regions, trace_path):
    """record_function regions, read from key_averages; no trace written."""
    from torch.profiler import ProfilerActivity, profile, record_function

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for name, fn in regions.items():
            with record_function(name):
                fn()
    totals = {e.key: e.cpu_time_total for e in prof.key_averages() if e.key in regions}
    return max(totals, key=totals.get)
