# solution: pick-workers
# fails: 
# says: 
import logging
import statistics


def pick_num_workers(measure, counts, margin=0.1, repeats=3):
    """The smallest count within ``margin`` of the best median; says which counts it skipped."""
    medians = {}
    for count in sorted(counts):
        try:
            medians[count] = statistics.median([measure(count) for _ in range(repeats)])
        except Exception as err:
            logging.warning("num_workers=%d skipped: %r", count, err)
    if not medians:
        raise RuntimeError(f"no worker count in {list(counts)} could be measured")
    best = max(medians.values())
    return min(count for count, median in medians.items() if median >= (1 - margin) * best)
