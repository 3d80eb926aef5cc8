# solution: choose-device
# fails: choose-device-default choose-device-type choose-device-built-no-gpu choose-device-mps choose-device-request choose-device-missing
# says: write it yourself
# Delegation: the course's own picker answers the exercise; calling it earns nothing here (its
# DeviceUnavailableError is a RuntimeError, so this got full marks before the tripwire).
from helpers.device import pick_device


def choose_device(requested=None):
    return pick_device(requested)
