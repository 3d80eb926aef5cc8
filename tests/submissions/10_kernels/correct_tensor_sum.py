# solution: roofline-bound
# fails:
# says:
# Correct, written differently: FLOPs and bytes as tensors (a 0-d tensor returned), the ridge point named.
def matmul_intensity(m, n, k, dtype):
    sizes = torch.tensor([m * k, k * n, m * n], dtype=torch.float64)
    return 2.0 * m * n * k / (sizes.sum() * dtype.itemsize)


def bound(intensity, peak_flops, bandwidth):
    ridge_point = peak_flops / bandwidth
    verdicts = {True: "compute", False: "memory"}
    return verdicts[bool(intensity >= ridge_point)]
