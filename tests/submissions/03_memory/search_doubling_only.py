# solution: max-batch-size
# fails: max-batch-size-largest
# says: bisect
def max_batch_size(step, budget, start=1, limit=65536):
    """Doubles until the first failure and stops there: no bisection."""
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
    n = start
    while n < limit and fits(min(2 * n, limit)):
        n = min(2 * n, limit)
    return n
