# solution: diagnose-error
# fails: 
# says: 
# correct, written differently: a table of regular expressions, in another order
import re

RULES = [
    (r"out of memory", "memory", "Lower the batch size or use mixed precision (autocast)."),
    (r"between 0 and 1", "range", "Apply sigmoid first, or use BCEWithLogitsLoss on the logits."),
    (r"device-side assert|n_classes|out of bounds|index out of range", "index",
     "Make every class label and index fit its range (0 <= label < classes)."),
    (r"dtype|scalar type", "dtype", "Cast: inputs .float(), class targets .long()."),
    (r"shape|size of tensor|batch_size", "shape", "Reshape the input so the shapes fit, or change in_features."),
    (r"same device|expected device", "device", "Put the model and the data on one device with .to(device)."),
    (r"\bnan\b|\binf\b", "nan", "Use log_softmax, clip the gradients, lower the learning rate."),
    (r"not compiled with cuda|no cuda", "no-cuda", "Use torch.cuda.is_available() and pick the CPU device otherwise."),
]


def diagnose(err):
    """(category, fix) by the first rule whose pattern the message matches."""
    if isinstance(err, torch.OutOfMemoryError):
        return RULES[0][1], RULES[0][2]
    for pattern, category, fix in RULES:
        if re.search(pattern, str(err), flags=re.IGNORECASE):
            return category, fix
    return "unknown", "Read the traceback."
