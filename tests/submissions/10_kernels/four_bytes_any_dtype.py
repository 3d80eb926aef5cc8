# solution: roofline-bound
# fails: roofline-bound-intensity roofline-bound-predict
# says: ignores the dtype's size
# Typical mistake: 4 bytes an element whatever the dtype: right in float32, half the intensity in bfloat16.
def matmul_intensity(m, n, k, dtype):
    return 2 * m * n * k / ((m * k + k * n + m * n) * 4)


def bound(intensity, peak_flops, bandwidth):
    return "compute" if intensity >= peak_flops / bandwidth else "memory"

