# solution: pick-workers
# fails: pick-workers-fails
# says: your function's own code
import statistics


def pick_num_workers(measure, counts, margin=0.1, repeats=3):
    """The smallest count within ``margin`` of the best median."""
    medians = {}
    for count in counts:
        try:
            medians[count] = statistics.median([measure(count) for _ in range(repeats)])
        except Exception as err:
            print(f"num_workers={count} skipped: {err}")
    if not medians:
        raise RuntimeError("no count could be measured")
    best = max(medians.values())
    # a bug of its own: a skipped count has no median (KeyError), which is not a measurement failing
    return min(c for c in sorted(counts) if medians[c] >= (1 - margin) * best)
