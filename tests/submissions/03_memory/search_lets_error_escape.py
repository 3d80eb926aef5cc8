# solution: max-batch-size
# fails: max-batch-size-fits max-batch-size-largest max-batch-size-recover max-batch-size-released
# says: recover
def max_batch_size(step, budget, start=1, limit=65536):
    """Never catches the out-of-memory error: the first trial that does not fit ends the search."""
    good = 0
    n = start
    while n <= limit:
        with budget:
            step(n)
        good = n
        n *= 2
    return good
