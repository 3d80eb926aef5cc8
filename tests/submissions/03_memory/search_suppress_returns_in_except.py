# solution: max-batch-size
# fails:
# says:
import contextlib
import gc


def max_batch_size(step, budget, start=1, limit=65536):
    """Written differently: contextlib.suppress, and a helper that returns False from inside except."""
    def fits(n):
        ok = False
        with contextlib.suppress(torch.OutOfMemoryError):
            with budget:
                step(n)
            ok = True
        return ok

    def tries(n):
        try:
            with budget:
                step(n)
            return True
        except torch.OutOfMemoryError:
            return False

    if not tries(start):
        gc.collect()
        return 0
    n = start
    while n < limit:
        bigger = min(2 * n, limit)
        if not fits(bigger):
            gc.collect()
            lo, hi = n, bigger
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if tries(mid):
                    lo = mid
                else:
                    hi = mid
            return lo
        n = bigger
    return limit
