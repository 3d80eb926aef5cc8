# solution: choose-device
# fails: choose-device-default choose-device-built-no-gpu choose-device-mps choose-device-request choose-device-missing
# says: cuda
# Cheating: the checks are redefined to do nothing, plus a constant answer. The grade cells import
# what they use inside the cell, so these definitions change nothing they run.
def check(*args, **kwargs):
    pass


check_equal = check_type = check_raises = check_automatic_choice = check_request = check_refuses = check


def solved(fn, *args, **kwargs):
    return torch.device("cuda")


def passed(what):
    print(f"\u2714 {what}: all checks passed.")


class FakeMachine:
    def __init__(self, *args, **kwargs):
        pass


ch02 = None


def choose_device(requested=None):
    return torch.device("cuda")
