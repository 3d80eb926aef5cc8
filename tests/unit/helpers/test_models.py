"""helpers.models: seeding repeats, the shared models have the expected shapes."""

import torch

from helpers.models import MLP, SimpleModel, make_regression, set_seed


def test_set_seed_repeats_torch_draws():
    set_seed(3)
    a = torch.randn(4)
    set_seed(3)
    assert torch.equal(a, torch.randn(4))


def test_models_shapes():
    assert SimpleModel()(torch.randn(5, 10)).shape == (5, 1)
    assert MLP(in_features=4, hidden=8, out_features=3, depth=3)(torch.randn(2, 4)).shape == (2, 3)


def test_make_regression_is_deterministic_and_learnable():
    x1, y1 = make_regression(n=64, in_features=8, seed=1)
    x2, y2 = make_regression(n=64, in_features=8, seed=1)
    assert torch.equal(x1, x2) and torch.equal(y1, y2)
    assert x1.shape == (64, 8) and y1.shape == (64, 1)
    assert y1.std() > 0.1  # a signal, not just noise
