# solution: time-on-device
# fails: time-on-device-runs time-on-device-sync time-on-device-warmup time-on-device-untimed-warmup time-on-device-median
# says: write it yourself
# Everything by hand except the synchronising clock, taken from the course (bench.sync_timer): that clock is
# the heart of the exercise, so it earns nothing here.
import statistics


def time_on_device(fn, device, warmup=3, repeats=10):
    clock = bench.sync_timer(device)
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = clock()
        fn()
        times.append(clock() - start)
    return statistics.median(times)
