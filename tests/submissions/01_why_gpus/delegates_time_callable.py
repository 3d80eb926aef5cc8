# solution: time-on-device
# fails: time-on-device-runs time-on-device-sync time-on-device-warmup time-on-device-untimed-warmup time-on-device-median
# says: write it yourself
# Delegates to the course's own timer, bench.time_callable: right on every device, and worth nothing here.
def time_on_device(fn, device, warmup=3, repeats=10):
    return bench.time_callable(fn, device, warmup=warmup, min_run_time=0.01, warn=False).median
