# solution: diagnose-error
# fails: diagnose-cuda-texts diagnose-memory-nan diagnose-fixes
# says: torch.OutOfMemoryError
# matches out-of-memory by Python's MemoryError: torch.OutOfMemoryError subclasses RuntimeError, not MemoryError
def diagnose(err):
    """(category, fix) for an exception: category as in the table, fix a sentence naming what to change."""
    text = str(err).lower()
    if isinstance(err, MemoryError):
        return "memory", "Use a smaller batch, autocast (mixed precision), gradient accumulation or no_grad."
    if "dtype" in text or "scalar type" in text:
        return "dtype", "Convert the tensors: inputs with .float(), class labels with .long()."
    if "shape" in text or "size of tensor" in text or "batch_size" in text:
        return "shape", "Print the shapes and reshape the input, or fix the layer's in_features."
    if "device" in text and ("expected device" in text or "same device" in text):
        return "device", "Move the model and every input to the same device with .to(device)."
    if "between 0 and 1" in text:
        return "range", "Give BCELoss probabilities (sigmoid first), or use BCEWithLogitsLoss on the logits."
    if ("device-side assert" in text or "out of bounds" in text or "index out of range" in text
            or "n_classes" in text):
        return "index", "Check that every label and index is in range: 0 <= label < number of classes."
    if "nan" in text or "inf" in text:
        return "nan", "Find the first non-finite value; use log_softmax, clip gradients or lower the learning rate."
    if "cuda" in text:
        return "no-cuda", "Check torch.cuda.is_available() and fall back to the CPU device instead of 'cuda'."
    return "unknown", "Read the full traceback."
