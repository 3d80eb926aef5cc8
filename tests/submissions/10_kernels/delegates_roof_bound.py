# solution: roofline-bound
# fails: roofline-bound-verdict roofline-bound-predict
# says: write it yourself
# The intensity by hand, the verdict from the course's own roof (helpers.roofline.Roof.bound, which chapter 10
# builds in section 1): the heart of the exercise, so it earns nothing here.
from helpers import roofline


def matmul_intensity(m, n, k, dtype):
    return 2 * m * n * k / ((m * k + k * n + m * n) * dtype.itemsize)


def bound(intensity, peak_flops, bandwidth):
    return roofline.Roof(peak_flops, bandwidth).bound(intensity)
