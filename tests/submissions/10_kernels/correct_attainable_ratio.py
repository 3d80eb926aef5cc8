# solution: roofline-bound
# fails:
# says:
# Correct, written differently: the element size from an empty tensor, the verdict from the roofline's attainable
# FLOP/s against the peak.
def matmul_intensity(m, n, k, dtype):
    element = torch.empty((), dtype=dtype).element_size()
    a, b, c = m * k, k * n, m * n
    return (2 * m * n * k) / ((a + b + c) * element)


def bound(intensity, peak_flops, bandwidth):
    attainable = min(peak_flops, intensity * bandwidth)
    return "memory" if attainable < peak_flops else "compute"
