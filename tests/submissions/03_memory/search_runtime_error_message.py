# solution: max-batch-size
# fails:
# says:
def max_batch_size(step, budget, start=1, limit=65536):
    """Written differently: except RuntimeError with a message check (the pre-2.5 idiom), a while loop with lo/hi."""
    def fits(n):
        oom = False
        try:
            with budget:
                step(n)
        except RuntimeError as e:
            if "out of memory" not in str(e):
                raise
            oom = True
        if oom:
            mem.free_memory(budget.device)
        return not oom

    if not fits(start):
        return 0
    lo, hi = start, start
    while hi < limit and fits(min(hi * 2, limit)):
        hi = lo = min(hi * 2, limit)
    if lo >= limit:
        return limit
    hi = min(lo * 2, limit)
    while lo + 1 < hi:
        mid = lo + (hi - lo) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo
