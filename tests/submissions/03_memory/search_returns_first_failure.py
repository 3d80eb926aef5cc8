# solution: max-batch-size
# fails: max-batch-size-fits
# says: exceeds the budget
def max_batch_size(step, budget, start=1, limit=65536):
    """Bisection that returns the first size that failed instead of the last that fitted."""
    def fits(n):
        oom = False
        try:
            with budget:
                step(n)
        except torch.OutOfMemoryError:
            oom = True
        mem.free_memory(budget.device)
        return not oom

    if not fits(start):
        return start
    good, bad = start, None
    while bad is None:
        if good >= limit:
            return limit
        n = min(2 * good, limit)
        if fits(n):
            good = n
        else:
            bad = n
    while bad - good > 1:
        mid = (good + bad) // 2
        if fits(mid):
            good = mid
        else:
            bad = mid
    return bad
