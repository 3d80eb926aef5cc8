# solution: roofline-bound
# fails: roofline-bound-intensity roofline-bound-predict
# says: multiply-add as one FLOP
# Typical mistake: m·n·k FLOPs, a multiply-add counted as one (the 1024 square drops below the ridge point).
def matmul_intensity(m, n, k, dtype):
    return m * n * k / ((m * k + k * n + m * n) * dtype.itemsize)


def bound(intensity, peak_flops, bandwidth):
    return "compute" if intensity >= peak_flops / bandwidth else "memory"

