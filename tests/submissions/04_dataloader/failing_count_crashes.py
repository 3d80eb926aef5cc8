# solution: pick-workers
# fails: pick-workers-fails
# says: measurement fails
import statistics


def pick_num_workers(measure, counts, margin=0.1, repeats=3):
    """The smallest count within ``margin`` of the best median."""
    medians = {count: statistics.median([measure(count) for _ in range(repeats)]) for count in counts}
    best = max(medians.values())
    return min(c for c, m in medians.items() if m >= (1 - margin) * best)
