# solution: max-batch-size
# fails: max-batch-size-only-oom
# says: catch only torch.OutOfMemoryError
def max_batch_size(step, budget, start=1, limit=65536):
    """Catches every RuntimeError without looking at it: a shape error looks like a full GPU."""
    def fits(n):
        failed = False
        try:
            with budget:
                step(n)
        except RuntimeError:
            failed = True
        if failed:
            mem.free_memory(budget.device)
        return not failed

    if not fits(start):
        return 0
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
    return good
