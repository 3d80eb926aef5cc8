"""helpers.checks.ch00: the parameter-count verdict passes a right count and names each wrong one."""

import math

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
    ch00.check_count(right, ch00.conv_net(3, 4, 3, 2), (4 * 3 * 3 * 3 + 4) + (2 * 4 + 2) + 1)
    ch00.check_count(right, ch00.tied_model(10, 4), 10 * 4 + 4 + 4 + 10)


def test_the_case_models_have_every_rank_and_a_shared_weight():
    ranks = {p.dim() for p in ch00.conv_net().parameters()}
    assert ranks == {0, 1, 2, 4}
    tied = ch00.tied_model(vocab=6, width=3)
    assert tied.out.weight is tied.embed.weight
    assert tied(torch.tensor([[1, 2]])).shape == (1, 2, 6)
    assert ch00.conv_net(1, 2, 3, 5)(torch.randn(2, 1, 4, 4)).shape == (2, 5)


@pytest.mark.parametrize("counter, model, expected, named", [
    (lambda m: len(list(m.parameters())), SimpleModel(), 11, "Counting tensors"),
    (lambda m: sum(len(p) for p in m.parameters()), SimpleModel(), 11, "len(p)"),
    (lambda m: sum(p.numel() for p in m.parameters()), frozen_mlp(), 90, "frozen"),
    (lambda m: sum(p.numel() for mod in m.modules() for p in mod.parameters()), SimpleModel(), 11, "more than once"),
    (lambda m: torch.tensor(11), SimpleModel(), 11, "Python int"),
    (lambda m: "11", SimpleModel(), 11, "as an int"),
    (lambda m: sum(math.prod(p.shape[:2]) for p in m.parameters()), ch00.conv_net(3, 4, 3, 2), 123,
     "shape[0] * shape[1]"),
    (lambda m: sum(p.numel() for _, p in m.named_parameters(remove_duplicate=False)), ch00.tied_model(10, 4), 58,
     "counts once"),
    (lambda m: sum(p.numel() for mod in m.modules() for p in mod.parameters(recurse=False)), ch00.tied_model(10, 4),
     58, "counts once"),
    (lambda m: 1000, ch00.tied_model(10, 4), 58, "more than once"),
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


@pytest.mark.parametrize("counter, raised", [
    (lambda m: sum(p.shape[0] * (p.shape[1] if p.dim() > 1 else 1) for p in m.parameters()), "IndexError"),
    (lambda m: sum(len(p) for p in m.parameters()), "TypeError"),
])
def test_a_crash_on_a_0d_parameter_is_named_not_a_traceback(counter, raised):
    with pytest.raises(CheckFailed, match=raised) as info:
        ch00.check_count(counter, ch00.conv_net(), 123, "count_parameters(conv)")
    assert "0-d" in str(info.value) and "p.numel()" in str(info.value)


def test_a_hint_never_suggests_a_pattern_that_counts_a_shared_weight_twice():
    for mistake, hint in ch00._HINTS.items():
        if "recurse=False" in hint:
            assert "once" in hint and "id(p)" in hint, mistake
