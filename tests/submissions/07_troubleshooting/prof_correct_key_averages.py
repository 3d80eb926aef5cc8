# solution: profile-regions
# fails: 
# says: 
# correct, written differently: exports the trace, answers from key_averages
def profile_regions(regions, trace_path):
    """Exports the trace; ranks the regions by key_averages' CPU totals."""
    from torch.profiler import ProfilerActivity, profile, record_function

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for name, fn in regions.items():
            with record_function(name):
                fn()
    prof.export_chrome_trace(str(trace_path))
    ranked = sorted((e for e in prof.key_averages() if e.key in regions), key=lambda e: e.cpu_time_total)
    return ranked[-1].key
