# solution: max-batch-size
# fails: max-batch-size-recover max-batch-size-released
# says: still held
def max_batch_size(step, budget, start=1, limit=65536):
    """Keeps the last out-of-memory error to report it: its traceback keeps the failed trial's tensors alive."""
    last_error = None
    good, bad, n = 0, None, start
    while True:
        ok = True
        try:
            with budget:
                step(n)
        except torch.OutOfMemoryError as err:
            last_error = err
            ok = False
        if not ok:
            mem.free_memory(budget.device)
        if ok:
            good = n
        else:
            bad = n
        if good == 0:
            return 0
        if bad is None:
            if good >= limit:
                return limit
            n = min(2 * good, limit)
        elif bad - good > 1:
            n = (good + bad) // 2
        else:
            return good
