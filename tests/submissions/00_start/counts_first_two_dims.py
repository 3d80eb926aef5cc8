# solution: count-parameters
# fails: count-parameters-total
# says: p.numel() counts the elements of any shape
# Typical mistake: the size of a parameter as shape[0] * shape[1] (math.prod of the first two sizes,
# which also gives 1 for a 0-d scalar): right for Linear weights and biases, too little for a
# convolution's 4-d weight.
import math


def count_parameters(model):
    return sum(math.prod(p.shape[:2]) for p in model.parameters() if p.requires_grad)
