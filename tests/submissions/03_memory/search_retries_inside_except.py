# solution: max-batch-size
# fails: max-batch-size-recover
# says: still held
def max_batch_size(step, budget, start=1, limit=65536):
    """Retries inside the except block: the failed trial is still alive during the retry."""
    def search(good, bad):
        if bad is not None and bad - good <= 1:
            return good
        if bad is None and good >= limit:
            return limit
        n = min(2 * good, limit) if bad is None else (good + bad) // 2
        try:
            with budget:
                step(n)
        except torch.OutOfMemoryError:
            mem.free_memory(budget.device)
            return search(good, n)
        return search(n, bad)

    try:
        with budget:
            step(start)
    except torch.OutOfMemoryError:
        return 0
    return search(start, None)
