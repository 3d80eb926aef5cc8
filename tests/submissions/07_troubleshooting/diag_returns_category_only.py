# solution: diagnose-error
# fails: diagnose-cpu-errors diagnose-cuda-texts diagnose-memory-nan diagnose-fixes
# says: tuple
# returns the category alone
def diagnose(err):
    """The category only."""
    text = str(err).lower()
    if "out of memory" in text:
        return "memory"
    if "dtype" in text or "scalar type" in text:
        return "dtype"
    if "shape" in text or "size of tensor" in text or "batch_size" in text:
        return "shape"
    if "expected device" in text or "same device" in text:
        return "device"
    if "between 0 and 1" in text:
        return "range"
    if "nan" in text:
        return "nan"
    if "cuda" in text and "not compiled" in text:
        return "no-cuda"
    return "index"
