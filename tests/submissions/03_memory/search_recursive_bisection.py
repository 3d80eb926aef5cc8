# solution: max-batch-size
# fails:
# says:
def max_batch_size(step, budget, start=1, limit=65536):
    """Written differently: recursion for both phases, torch.cuda.OutOfMemoryError (the same class), del + gc outside except."""
    import gc

    def fits(n):
        failed = False
        try:
            with budget:
                step(n)
        except torch.cuda.OutOfMemoryError:
            failed = True
        if failed:
            gc.collect()  # only a failed trial leaves a traceback's cycle behind
        return not failed

    def bisect(good, bad):
        if bad - good <= 1:
            return good
        mid = (good + bad) // 2
        return bisect(mid, bad) if fits(mid) else bisect(good, mid)

    def grow(good):
        if good >= limit:
            return limit
        n = min(good * 2, limit)
        return grow(n) if fits(n) else bisect(good, n)

    return grow(start) if fits(start) else 0
