# solution: diagnose-error
# fails: 
# says: 
# correct, written differently: the exception's type first, then the message
def diagnose(err):
    """Type where it decides, message otherwise."""
    msg = str(err).lower()
    if isinstance(err, torch.OutOfMemoryError):
        return ("memory", "Reduce the batch size, accumulate gradients or use autocast.")
    if isinstance(err, IndexError) or "device-side assert" in msg or "t >= 0 && t < n_classes" in msg:
        return ("index", "Labels must lie in 0..num_classes-1; check y.min() and y.max().")
    if isinstance(err, AssertionError) and "cuda" in msg:
        return ("no-cuda", "Do not hard-code 'cuda': check torch.cuda.is_available() first.")
    if "out of bounds" in msg:
        return ("index", "An index is out of range: check it against the tensor's size.")
    if "out of memory" in msg:
        return ("memory", "Reduce the batch size, accumulate gradients or use autocast.")
    for words, answer in [(("dtype", "scalar type"), ("dtype", "Make the dtypes agree: .float() or .long().")),
                          (("shape", "size of tensor", "batch_size"), ("shape", "Fix the shapes: print x.shape.")),
                          (("device",), ("device", "Move everything to the same device.")),
                          (("between 0 and 1",), ("range", "Use BCEWithLogitsLoss, or sigmoid before BCELoss.")),
                          (("nan",), ("nan", "Look for the first NaN with torch.isfinite; clip or lower the lr."))]:
        if any(w in msg for w in words):
            return answer
    return ("unknown", "No idea")
