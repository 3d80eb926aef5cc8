# solution: time-on-device
# fails:
# says:
# Correct, written differently: timeit.repeat with number=1 and a clock that synchronises before each read.
import timeit

import numpy as np


def time_on_device(fn, device, warmup=3, repeats=10):
    def clock():
        dev.synchronize(device)
        return timeit.default_timer()

    for _ in range(warmup):
        fn()
    return float(np.median(timeit.repeat(fn, timer=clock, number=1, repeat=repeats)))
