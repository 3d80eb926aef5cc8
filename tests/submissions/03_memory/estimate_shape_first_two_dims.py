# solution: estimate-memory
# fails: estimate-memory-parameters estimate-memory-gradients estimate-memory-adam
# says: numel
import math


def training_memory(model, dtype):
    """Counts shape[0] * shape[1] (1 for a bias): right for Linear layers, wrong for a 4-d conv weight."""
    size = dtype.itemsize
    count = lambda p: math.prod(p.shape[:2])
    trainable = sum(count(p) for p in model.parameters() if p.requires_grad) * size
    return {"parameters": sum(count(p) for p in model.parameters()) * size,
            "gradients": trainable, "adam_state": 2 * trainable}
