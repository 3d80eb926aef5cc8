# solution: pick-workers
# fails: pick-workers-noise
# says: median
import statistics


def pick_num_workers(measure, counts, margin=0.1, repeats=3):
    """The smallest count within ``margin`` of the best median."""
    means = {}
    for count in sorted(counts):
        try:
            means[count] = statistics.mean([measure(count) for _ in range(repeats)])
        except Exception as err:
            print(f"num_workers={count} skipped: {err}")
            continue
    if not means:
        raise RuntimeError("no count could be measured")
    best = max(means.values())
    return min(c for c, m in means.items() if m >= (1 - margin) * best)
