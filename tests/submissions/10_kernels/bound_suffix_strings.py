# solution: roofline-bound
# fails: roofline-bound-verdict roofline-bound-predict
# says: exactly the string
# Typical mistake: the right verdict in other words ('memory-bound'), which code comparing with 'memory' misses.
def matmul_intensity(m, n, k, dtype):
    return 2 * m * n * k / ((m * k + k * n + m * n) * dtype.itemsize)


def bound(intensity, peak_flops, bandwidth):
    return "compute-bound" if intensity >= peak_flops / bandwidth else "memory-bound"
