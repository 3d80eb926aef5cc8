# solution: pick-workers
# fails: 
# says: 
import sys
import statistics


def pick_num_workers(measure, counts, margin=0.1, repeats=3):
    """The smallest count within ``margin`` of the best median; says which counts it skipped."""
    medians = {}
    for count in sorted(counts):
        try:
            medians[count] = statistics.median([measure(count) for _ in range(repeats)])
        except Exception as err:
            print(f"num_workers={count} skipped: {type(err).__name__}: {err}", file=sys.stderr)
    if not medians:
        raise RuntimeError(f"no worker count in {list(counts)} could be measured")
    best = max(medians.values())
    return min(count for count, median in medians.items() if median >= (1 - margin) * best)
