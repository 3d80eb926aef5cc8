# solution: count-parameters
# fails: count-parameters-total count-parameters-frozen count-parameters-shared
# says: numel
# Cheating: the checks are redefined to do nothing, plus a constant answer (right for the visible
# SimpleModel only). The grade cells import what they use inside the cell, so these definitions
# change nothing they run, and the hidden models catch the constant.
def check(*args, **kwargs):
    pass


check_equal = check_count = check


def solved(fn, *args, **kwargs):
    return 11


def passed(what):
    print(f"\u2714 {what}: all checks passed.")


ch00 = None


def count_parameters(model):
    return 11
