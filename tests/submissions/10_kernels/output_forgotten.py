# solution: roofline-bound
# fails: roofline-bound-intensity roofline-bound-predict
# says: forgets the output
# Typical mistake: only the inputs' bytes; C's write forgotten (the rank-256 product then looks compute-bound).
def matmul_intensity(m, n, k, dtype):
    bytes_read = (m * k + k * n) * dtype.itemsize
    return 2 * m * n * k / bytes_read


def bound(intensity, peak_flops, bandwidth):
    return "compute" if intensity >= peak_flops / bandwidth else "memory"

