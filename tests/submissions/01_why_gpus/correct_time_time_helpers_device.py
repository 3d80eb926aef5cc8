# solution: time-on-device
# fails:
# says:
# Correct, written differently: time.time() and the course's synchronize imported by name.
import time as clock

import numpy
from helpers.device import synchronize


def time_on_device(fn, device, warmup=3, repeats=10):
    for _ in range(warmup):
        fn()
    synchronize(device)
    samples = numpy.empty(repeats)
    for i in range(repeats):
        start = clock.time()
        fn()
        synchronize(device)
        samples[i] = clock.time() - start
    return float(numpy.median(samples))
