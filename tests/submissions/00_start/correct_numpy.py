# solution: count-parameters
# fails:
# says:
# Correct, written differently: numpy's integer sum (an np.int64, which equals the int).
import numpy as np


def count_parameters(model):
    sizes = [p.numel() for p in model.parameters() if p.requires_grad]
    return int(np.sum(sizes, dtype=np.int64)) if sizes else 0
