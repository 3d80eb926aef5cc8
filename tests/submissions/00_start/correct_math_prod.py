# solution: count-parameters
# fails:
# says:
# Correct, written differently: math.prod of each shape, filter() for the trainable ones.
import math


def count_parameters(model):
    trainable = filter(lambda p: p.requires_grad, model.parameters())
    return sum(math.prod(p.shape) for p in trainable)
