# solution: pick-workers
# fails: 
# says: 
import numpy as np


def pick_num_workers(measure, counts, margin=0.1, repeats=3):
    """The smallest count within ``margin`` of the best median."""
    good = {}
    for n in counts:
        try:
            samples = [measure(n) for _ in range(repeats)]
        except Exception as err:  # noqa: BLE001
            print("skipping", n, "because", repr(err))
            continue
        good[n] = float(np.median(samples))
    if len(good) == 0:
        raise RuntimeError("every worker count failed to measure")
    threshold = (1.0 - margin) * max(good.values())
    return sorted(n for n in good if good[n] >= threshold)[0]
