# solution: pick-workers
# fails: pick-workers-noise
# says: median
def pick_num_workers(measure, counts, margin=0.1, repeats=3):
    """The smallest count within ``margin`` of the best median."""
    rates = {}
    for count in sorted(counts):
        try:
            rates[count] = measure(count)  # one measurement per count
        except Exception as err:
            print(f"num_workers={count} skipped: {err}")
            continue
    if not rates:
        raise RuntimeError("no count could be measured")
    best = max(rates.values())
    return min(c for c, m in rates.items() if m >= (1 - margin) * best)
