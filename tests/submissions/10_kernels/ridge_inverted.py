# solution: roofline-bound
# fails: roofline-bound-verdict roofline-bound-predict
# says: ridge point is inverted
# Typical mistake: the ridge point as bandwidth / peak (a fraction of a FLOP per byte): everything is compute-bound.
def matmul_intensity(m, n, k, dtype):
    return 2 * m * n * k / ((m * k + k * n + m * n) * dtype.itemsize)


def bound(intensity, peak_flops, bandwidth):
    ridge = bandwidth / peak_flops
    return "compute" if intensity >= ridge else "memory"
