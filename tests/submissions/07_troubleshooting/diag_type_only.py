# solution: diagnose-error
# fails: diagnose-cpu-errors diagnose-cuda-texts diagnose-memory-nan diagnose-fixes
# says: read the message
# decides by the exception's type alone
def diagnose(err):
    """(category, fix) from the exception's type."""
    if isinstance(err, IndexError):
        return "index", "Check that every label and index is in range."
    if isinstance(err, torch.OutOfMemoryError):
        return "memory", "Use a smaller batch."
    if isinstance(err, AssertionError):
        return "no-cuda", "Check torch.cuda.is_available() before using CUDA."
    return "shape", "Print the shapes and reshape the input."
