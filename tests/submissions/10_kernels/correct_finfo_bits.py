# solution: roofline-bound
# fails:
# says:
# Correct, written differently: the size from finfo's bits, FLOPs and bytes named, the verdict from a multiplication.
def matmul_intensity(m, n, k, dtype):
    size = torch.finfo(dtype).bits // 8
    flops = 2 * m * n * k
    moved = size * (m * k) + size * (k * n) + size * (m * n)
    return flops / moved


def bound(intensity, peak_flops, bandwidth):
    if intensity * bandwidth >= peak_flops:
        return "compute"
    return "memory"
