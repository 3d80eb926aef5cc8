# solution: choose-device
# fails:
# says:
# Correct, written differently: the course helper (its DeviceUnavailableError is a RuntimeError).
from helpers.device import pick_device


def choose_device(requested=None):
    return pick_device(requested)
