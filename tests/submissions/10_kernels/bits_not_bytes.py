# solution: roofline-bound
# fails: roofline-bound-intensity roofline-bound-predict
# says: bits, not bytes
# Typical mistake: the element size in bits (finfo's bits without // 8), so the bytes are 8 times too many.
def matmul_intensity(m, n, k, dtype):
    return 2 * m * n * k / ((m * k + k * n + m * n) * torch.finfo(dtype).bits)


def bound(intensity, peak_flops, bandwidth):
    return "compute" if intensity >= peak_flops / bandwidth else "memory"

