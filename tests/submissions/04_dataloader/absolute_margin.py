# solution: pick-workers
# fails: pick-workers-smallest
# says: margin
import statistics


def pick_num_workers(measure, counts, margin=0.1, repeats=3):
    """The smallest count within ``margin`` of the best median."""
    medians = {}
    for count in sorted(counts):
        try:
            medians[count] = statistics.median([measure(count) for _ in range(repeats)])
        except Exception as err:
            print(f"num_workers={count} skipped: {err}")
            continue
    if not medians:
        raise RuntimeError("no count could be measured")
    best = max(medians.values())
    return min(c for c, m in medians.items() if m >= best - margin)  # margin in samples/s, not a fraction
