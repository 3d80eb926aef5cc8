# solution: count-parameters
# fails:
# says:
# Correct, written differently: a dict keyed by the tensors themselves (a Parameter hashes by
# identity), every name each one has, then the product of each shape with functools.reduce.
import functools
import operator


def count_parameters(model):
    unique = {p: name for name, p in model.named_parameters(remove_duplicate=False)}
    return sum(functools.reduce(operator.mul, p.shape, 1) for p in unique if p.requires_grad)
