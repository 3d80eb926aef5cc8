"""helpers.checks.ch00: the parameter-count verdict passes a right count and names each wrong one."""

import pytest
import torch

from helpers.checks import CheckFailed, ch00
from helpers.models import MLP, SimpleModel


def right(model):
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def frozen_mlp():
    model = MLP(in_features=4, hidden=8, out_features=2, depth=2)
    model.net[0].requires_grad_(False)
    return model


def test_a_right_count_passes():
    ch00.check_count(right, SimpleModel(), 11)
    ch00.check_count(right, frozen_mlp(), 90)
    ch00.check_count(right, SimpleModel().requires_grad_(False), 0)


@pytest.mark.parametrize("counter, model, expected, named", [
    (lambda m: len(list(m.parameters())), SimpleModel(), 11, "Counting tensors"),
    (lambda m: sum(len(p) for p in m.parameters()), SimpleModel(), 11, "len(p)"),
    (lambda m: sum(p.numel() for p in m.parameters()), frozen_mlp(), 90, "frozen"),
    (lambda m: sum(p.numel() for mod in m.modules() for p in mod.parameters()), SimpleModel(), 11, "more than once"),
    (lambda m: torch.tensor(11), SimpleModel(), 11, "Python int"),
    (lambda m: "11", SimpleModel(), 11, "as an int"),
])
def test_each_wrong_count_is_named(counter, model, expected, named):
    with pytest.raises(CheckFailed, match=f"expected {expected}") as info:
        ch00.check_count(counter, model, expected, "count_parameters(case)")
    assert named in str(info.value)
    assert str(info.value).startswith("count_parameters(case)")


def test_an_unwritten_counter_says_so():
    def count_parameters(model):
        raise NotImplementedError()

    with pytest.raises(CheckFailed, match="`count_parameters` is not written yet"):
        ch00.check_count(count_parameters, SimpleModel(), 11)


def test_the_default_description_names_the_model():
    with pytest.raises(CheckFailed, match=r"count_parameters\(SimpleModel\(\.\.\.\)\)"):
        ch00.check_count(lambda m: 0, SimpleModel(), 11)
