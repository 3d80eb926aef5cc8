# solution: time-on-device
# fails:
# says:
# Correct, written differently: torch.cuda.synchronize() whenever CUDA has been initialised (it has, once work
# ran on a GPU), clock read through time.perf_counter bound to a module-level name, numpy's median.
import time

import numpy as np

_now = time.perf_counter


def time_on_device(fn, device, warmup=3, repeats=10):
    def settle():
        if torch.cuda.is_initialized():
            torch.cuda.synchronize()

    for _ in range(warmup):
        fn()
    out = np.zeros(repeats)
    for i in range(repeats):
        settle()
        t = _now()
        fn()
        settle()
        out[i] = _now() - t
    return np.median(out)
