# solution: pick-workers
# fails: 
# says: 
def pick_num_workers(measure, counts, margin=0.1, repeats=3):
    """The smallest count within ``margin`` of the best median."""
    results = []
    for n in sorted(set(counts)):
        values = []
        try:
            for _ in range(repeats):
                values.append(measure(n))
        except Exception as err:
            print(f"num_workers={n}: {err}")
            continue
        values.sort()
        mid = len(values) // 2
        median = values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2
        results.append((n, median))
    if not results:
        raise RuntimeError("nothing to choose from: every count failed")
    best = max(m for _, m in results)
    for n, m in results:
        if m >= best * (1 - margin):
            return n
