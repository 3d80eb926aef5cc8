# solution: roofline-bound
# fails: roofline-bound-verdict roofline-bound-predict
# says: comparison is reversed
# Typical mistake: the verdicts swapped: a high intensity called memory-bound.
def matmul_intensity(m, n, k, dtype):
    return 2 * m * n * k / ((m * k + k * n + m * n) * dtype.itemsize)


def bound(intensity, peak_flops, bandwidth):
    return "memory" if intensity >= peak_flops / bandwidth else "compute"
