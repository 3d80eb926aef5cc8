# solution: max-batch-size
# fails:
# says:
def max_batch_size(step, budget, start=1, limit=65536):
    """Written differently: exponential search, then binary search over [lo, hi) with a full gc."""
    import gc

    def trial(n):
        failed = False
        try:
            with budget:
                step(n)
        except torch.OutOfMemoryError:
            failed = True
        if failed:
            gc.collect()
        return not failed

    lo = 0
    hi = start
    while hi <= limit and trial(hi):
        lo, hi = hi, hi * 2
    if hi > limit:
        if lo == limit:
            return limit
        hi = limit + 1 if trial(limit) is False else None
        if hi is None:
            return limit
    if lo == 0:
        return 0
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if trial(mid):
            lo = mid
        else:
            hi = mid
    return lo
