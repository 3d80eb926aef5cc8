# solution: max-batch-size
# fails: max-batch-size-largest
# says: limit
def max_batch_size(step, budget, start=1, limit=65536):
    """Doubles past limit: returns a size larger than asked for when the budget allows it."""
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
        return 0
    good, bad = start, None
    while bad is None:
        if fits(2 * good):
            good = 2 * good
            if good > 4 * limit:
                return good
        else:
            bad = 2 * good
    while bad - good > 1:
        mid = (good + bad) // 2
        if fits(mid):
            good = mid
        else:
            bad = mid
    return good
