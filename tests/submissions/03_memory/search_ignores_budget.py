# solution: max-batch-size
# fails: max-batch-size-fits
# says: exceeds the budget
def max_batch_size(step, budget, start=1, limit=65536):
    """Runs the trials outside `with budget:`, so nothing ever runs out of memory."""
    def fits(n):
        try:
            step(n)
        except torch.OutOfMemoryError:
            return False
        return True

    n = start
    while n < limit and fits(min(2 * n, limit)):
        n = min(2 * n, limit)
    return n
