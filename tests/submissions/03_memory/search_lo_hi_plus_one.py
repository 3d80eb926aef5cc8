# solution: max-batch-size
# fails:
# says:
def max_batch_size(step, budget, start=1, limit=65536):
    """Written differently: the closed-interval bisection (mid rounded up), the exception kept and dropped outside except."""
    def fits(n):
        error = None
        try:
            with budget:
                step(n)
        except torch.OutOfMemoryError as err:
            error = err
        failed = error is not None
        del error  # the exception, and the failed trial it holds, go here
        mem.free_memory(budget.device)
        return not failed

    if not fits(start):
        return 0
    lo = start
    while lo < limit and fits(min(2 * lo, limit)):
        lo = min(2 * lo, limit)
    if lo == limit:
        return limit
    hi = min(2 * lo, limit) - 1  # the largest size not yet known to fail
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo
