"""helpers.checks.ch02: each verdict passes a right answer and fails a wrong one with a message naming the mistake."""

from collections import namedtuple

import pytest
import torch
from torch import nn

from helpers.checks import CheckFailed, FakeMachine, ch02
from helpers.models import SimpleModel

# --- right answers (what a learner could write) -------------------------------------------------------------------


def choose_device(requested=None):
    have = [torch.device("cuda", i) for i in range(torch.cuda.device_count())] if torch.cuda.is_available() else []
    if torch.backends.mps.is_available():
        have.append(torch.device("mps"))
    have.append(torch.device("cpu"))
    if requested is None:
        return have[0]
    wanted = torch.device(requested)
    if wanted.index is None and any(d.type == wanted.type for d in have):
        return wanted
    if wanted in have:
        return wanted
    raise RuntimeError(f"{wanted} is not here; this machine has {', '.join(map(str, have))}")


def move_batch(batch, device):
    if isinstance(batch, torch.Tensor):
        return batch.to(device)
    if isinstance(batch, dict):
        return {k: move_batch(v, device) for k, v in batch.items()}
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):
        return type(batch)(*(move_batch(v, device) for v in batch))
    if isinstance(batch, (list, tuple)):
        return type(batch)(move_batch(v, device) for v in batch)
    return batch


def forward_on(model, x, device):
    model.to(device).eval()
    with torch.no_grad():
        return model(x.to(device))


Pair = namedtuple("Pair", "inputs target")

# --- choose_device --------------------------------------------------------------------------------------------------


def test_choice_verdicts_pass_a_right_picker():
    ch02.check_automatic_choice(choose_device, FakeMachine(), "cpu")
    ch02.check_automatic_choice(choose_device, FakeMachine(cuda=2), "cuda:0")
    ch02.check_automatic_choice(choose_device, FakeMachine(mps=True), "mps")
    ch02.check_automatic_choice(choose_device, FakeMachine(built_for="cuda"), "cpu")
    ch02.check_request(choose_device, FakeMachine(cuda=2), "cuda:1", "cuda:1")
    ch02.check_request(choose_device, FakeMachine(cuda=1), "cuda", "cuda")
    ch02.check_request(choose_device, FakeMachine(cuda=1), torch.device("cpu"), "cpu")
    ch02.check_refuses(choose_device, FakeMachine(), "cuda")
    ch02.check_refuses(choose_device, FakeMachine(cuda=2), "cuda:3")


@pytest.mark.parametrize("wrong, machine, expected, named", [
    (lambda requested=None: torch.device("cpu"), FakeMachine(cuda=1), "cuda:0", "prefer CUDA"),
    (lambda requested=None: torch.device("cpu"), FakeMachine(mps=True), "mps", "torch.backends.mps.is_available()"),
    (lambda requested=None: torch.accelerator.current_accelerator() or torch.device("cpu"),
     FakeMachine(built_for="cuda"), "cpu", "built for"),
    (lambda requested=None: torch.device("cuda", 1), FakeMachine(cuda=2), "cuda:0", "first GPU"),
])
def test_a_wrong_automatic_choice_is_named(wrong, machine, expected, named):
    with pytest.raises(CheckFailed, match="choose_device()") as info:
        ch02.check_automatic_choice(wrong, machine, expected)
    assert named in str(info.value)


def test_a_string_is_judged_by_the_device_it_names_outside_the_type_check():
    ch02.check_automatic_choice(lambda requested=None: "cpu", FakeMachine(built_for="cuda"), "cpu")
    ch02.check_request(lambda requested=None: str(requested), FakeMachine(cuda=2), "cuda:1", "cuda:1")
    with pytest.raises(CheckFailed, match="built for"):
        ch02.check_automatic_choice(lambda requested=None: "cuda", FakeMachine(built_for="cuda"), "cpu")


def test_the_type_check_passes_devices_and_names_a_string():
    ch02.check_returns_device(choose_device, FakeMachine())
    ch02.check_returns_device(choose_device, FakeMachine(cuda=2), "cuda:1")
    with pytest.raises(CheckFailed, match="not the string 'cpu'"):
        ch02.check_returns_device(lambda requested=None: "cpu", FakeMachine())
    with pytest.raises(CheckFailed, match=r"torch.device\(requested\)"):
        ch02.check_returns_device(lambda requested=None: requested or torch.device("cpu"), FakeMachine(cuda=1), "cpu")
    with pytest.raises(CheckFailed, match="return a torch.device"):
        ch02.check_returns_device(lambda requested=None: 0, FakeMachine(cuda=1))


def test_the_type_check_leaves_a_refused_request_to_the_other_checks():
    def refuses(requested=None):
        if requested is not None:
            raise RuntimeError("no")
        return torch.device("cpu")

    ch02.check_returns_device(refuses, FakeMachine(mps=True), "mps")
    with pytest.raises(CheckFailed, match="always an answer"):
        ch02.check_returns_device(lambda requested=None: 1 / 0, FakeMachine())


def test_a_request_refused_or_ignored_is_named():
    def refuses(requested=None):
        raise RuntimeError("no")

    with pytest.raises(CheckFailed, match="'cuda' names the current GPU"):
        ch02.check_request(refuses, FakeMachine(cuda=1), "cuda", "cuda")
    with pytest.raises(CheckFailed, match="the request wins"):
        ch02.check_request(refuses, FakeMachine(cuda=1), "cpu", "cpu")
    with pytest.raises(CheckFailed, match="index included"):
        ch02.check_request(lambda requested=None: torch.device("cuda", 0), FakeMachine(cuda=2), "cuda:1", "cuda:1")
    with pytest.raises(CheckFailed, match="as well as a string"):
        ch02.check_request(lambda requested=None: torch.device("cuda"), FakeMachine(cuda=1), torch.device("cpu"), "cpu")


def test_a_missing_device_not_refused_properly_is_named():
    with pytest.raises(CheckFailed, match="instead of raising.*do not fall back silently"):
        ch02.check_refuses(lambda requested=None: torch.device("cpu"), FakeMachine(), "cuda")
    with pytest.raises(CheckFailed, match="below torch.cuda.device_count"):
        ch02.check_refuses(lambda requested=None: torch.device(requested), FakeMachine(cuda=2), "cuda:3")

    def value_error(requested=None):
        raise ValueError("there is only cpu")

    def says_nothing(requested=None):
        raise RuntimeError("no such device")

    with pytest.raises(CheckFailed, match="contract says RuntimeError"):
        ch02.check_refuses(value_error, FakeMachine(), "cuda")
    with pytest.raises(CheckFailed, match="at least 'cpu'"):
        ch02.check_refuses(says_nothing, FakeMachine(), "cuda")


def test_the_fake_machine_reaches_names_the_learner_imported():
    from torch.cuda import is_available

    namespace = {"torch": torch, "is_available": is_available}
    exec("def choose_device(requested=None):\n"
         "    return torch.device('cuda') if is_available() else torch.device('cpu')\n", namespace)
    ch02.check_automatic_choice(namespace["choose_device"], FakeMachine(cuda=1), "cuda:0")
    assert namespace["is_available"] is is_available  # put back afterwards


def test_machine_words():
    assert ch02.machine_words(FakeMachine()) == "a CPU-only machine"
    assert ch02.machine_words(FakeMachine(cuda=2)) == "a machine with two CUDA GPUs"
    assert ch02.machine_words(FakeMachine(mps=True)) == "a Mac with MPS"
    assert "built for CUDA" in ch02.machine_words(FakeMachine(built_for="cuda"))


# --- move_batch -----------------------------------------------------------------------------------------------------


def test_move_verdicts_pass_a_right_mover():
    ch02.check_moves_flat(move_batch, {"x": torch.ones(2), "y": torch.arange(2)}, "meta")
    ch02.check_moves_flat(move_batch, [torch.ones(1)], "meta")
    ch02.check_moves_nested(move_batch, {"a": [{"b": (torch.ones(1),)}], "c": Pair(torch.ones(1), [])}, "meta")
    ch02.check_keeps_structure(move_batch, [Pair(torch.ones(1), ("s", 3, None)), {"k": 2.5}], "meta")
    ch02.check_keeps_batch_alone(move_batch, {"x": [torch.ones(1)], "y": ({"z": torch.ones(1)},)}, "meta")


def test_flat_mistakes_are_named():
    with pytest.raises(CheckFailed, match="dtype"):
        ch02.check_moves_flat(lambda b, d: {k: v.to(d, torch.float32) for k, v in b.items()},
                              {"y": torch.arange(2)}, "meta")
    with pytest.raises(CheckFailed, match="call .to\\(device\\) on every tensor"):
        ch02.check_moves_flat(lambda b, d: dict(b), {"x": torch.ones(1)}, "meta")
    with pytest.raises(CheckFailed, match="keys"):
        ch02.check_moves_flat(lambda b, d: {}, {"x": torch.ones(1)}, "meta")
    with pytest.raises(CheckFailed, match="a list must come back as a list"):
        ch02.check_moves_flat(lambda b, d: tuple(t.to(d) for t in b), [torch.ones(1)], "meta")


def test_nested_tensors_left_behind_are_named_with_their_place():
    top_only = lambda b, d: {k: v.to(d) if torch.is_tensor(v) else v for k, v in b.items()}  # noqa: E731
    with pytest.raises(CheckFailed, match=r"batch\['a'\]\[0\] is on cpu.*recursively"):
        ch02.check_moves_nested(top_only, {"a": [torch.ones(1)], "b": torch.ones(1)}, "meta")
    with pytest.raises(CheckFailed, match=r"nothing at batch\['a'\]\[0\]"):
        ch02.check_moves_nested(lambda b, d: {"a": []}, {"a": [torch.ones(1)]}, "meta")


@pytest.mark.parametrize("wrong, named", [
    (lambda b, d: tuple(move_batch(list(b), d)), "named tuple"),
    (lambda b, d: Pair(b.inputs.to(d), list(b.target)), "keep tuples as tuples"),
    (lambda b, d: Pair(b.inputs.to(d), ("sample-x", 3, None)), "a str is a Sequence"),
    (lambda b, d: Pair(b.inputs.to(d), ("sample-7", 3.0, None)), "leave strings, numbers and None unchanged"),
    (lambda b, d: Pair(b.inputs.to(d), ("sample-7", 3)), "had 3 items"),
    (lambda b, d: Pair(b.inputs.tolist(), b.target), "came back as a list"),
])
def test_structure_mistakes_are_named(wrong, named):
    with pytest.raises(CheckFailed, match=named):
        ch02.check_keeps_structure(wrong, Pair(torch.ones(2), ("sample-7", 3, None)), "meta")


def test_recursing_into_strings_and_calling_to_on_everything_are_explained():
    def recurses(batch, device):
        return recurses(batch, device)

    with pytest.raises(CheckFailed, match="a str is a Sequence"):
        ch02.check_keeps_structure(recurses, ["s"], "meta")
    with pytest.raises(CheckFailed, match="AttributeError.*Only tensors have .to"):
        ch02.check_keeps_structure(lambda b, d: [v.to(d) for v in b], ["s"], "meta")


def test_a_mutated_batch_is_named():
    def in_place(batch, device):
        for key, value in batch.items():
            batch[key] = move_batch(value, device)
        return batch

    def inner_in_place(batch, device):
        batch["x"][0] = batch["x"][0].to(device)
        return move_batch(batch, device)

    for wrong, place in ((in_place, "changed at batch "), (inner_in_place, "changed at batch['x']")):
        with pytest.raises(CheckFailed, match=r"changed the batch it was given") as info:
            ch02.check_keeps_batch_alone(wrong, {"x": [torch.ones(1)]}, "meta")
        assert place in str(info.value)


# --- forward_on -----------------------------------------------------------------------------------------------------


def test_forward_verdicts_pass_a_right_forward():
    model = SimpleModel()
    x = torch.randn(3, 10)
    ch02.check_forward_output(forward_on, model, x, "cpu", expected=model(x).detach())
    ch02.check_forward_stays_on(forward_on, SimpleModel(), x, "meta")
    ch02.check_forward_records_nothing(forward_on, SimpleModel(), x, "cpu")
    ch02.check_forward_eval(forward_on, nn.Sequential(nn.Linear(10, 4), nn.Dropout(0.5)), x, "cpu")
    ch02.check_forward_parameterless(forward_on, nn.ReLU(), torch.tensor([-1.0]), "cpu", expected=torch.tensor([0.0]))
    ch02.check_forward_parameterless(forward_on, nn.Flatten(), torch.ones(2, 3), "meta")
    assert torch.is_grad_enabled()


def test_a_wrong_output_is_named():
    model = SimpleModel()
    x = torch.randn(3, 10)
    with pytest.raises(CheckFailed, match="run the model on the input"):
        ch02.check_forward_output(lambda m, x, d: forward_on(m, x, d) + 1, model, x, "cpu", model(x).detach())
    with pytest.raises(CheckFailed, match="shape"):
        ch02.check_forward_output(lambda m, x, d: forward_on(m, x, d)[0], model, x, "cpu", model(x).detach())
    with pytest.raises(CheckFailed, match="return the model's output tensor"):
        ch02.check_forward_output(lambda m, x, d: forward_on(m, x, d).tolist(), model, x, "cpu", model(x).detach())
    with pytest.raises(CheckFailed, match="returned a tensor on meta"):
        ch02.check_forward_output(lambda m, x, d: forward_on(m, x, "meta"), model, x, "cpu", model(x).detach())


def test_an_output_off_the_device_is_named():
    with pytest.raises(CheckFailed, match="without .cpu()"):
        ch02.check_forward_stays_on(lambda m, x, d: forward_on(m, x, d).cpu(), SimpleModel(), torch.ones(1, 10), "meta")

    def fake_meta(model, x, device):  # an output moved to the CPU without copying: a new tensor there
        forward_on(model, x, device)
        return torch.zeros(1, 1)

    with pytest.raises(CheckFailed, match="the model ran on meta, so the output was moved afterwards"):
        ch02.check_forward_stays_on(fake_meta, SimpleModel(), torch.ones(1, 10), "meta")
    with pytest.raises(CheckFailed, match="move both the model and the input"):
        ch02.check_forward_stays_on(lambda m, x, d: torch.zeros(1), nn.ReLU(), torch.ones(1), "meta")


@pytest.mark.parametrize("wrong, named", [
    (lambda m, x, d: m.eval()(x), "output requires grad"),
    (lambda m, x, d: m.eval()(x).detach(), "does not undo that"),
    (lambda m, x, d: m.requires_grad_(False)(x), "requires_grad=False"),
    (lambda m, x, d: (torch.set_grad_enabled(False), m(x))[1], "set_grad_enabled(False) on its own"),
])
def test_recorded_gradients_are_named(wrong, named):
    with pytest.raises(CheckFailed, match=named.replace("(", r"\(").replace(")", r"\)")):
        ch02.check_forward_records_nothing(wrong, SimpleModel(), torch.randn(2, 10), "cpu")
    assert torch.is_grad_enabled(), "the verdict puts gradient recording back"


def test_training_mode_is_named():
    model = nn.Sequential(nn.Linear(10, 64), nn.Dropout(0.5), nn.Linear(64, 1))
    with pytest.raises(CheckFailed, match="model.eval()"):
        ch02.check_forward_eval(lambda m, x, d: m(x).detach(), model, torch.randn(8, 10), "cpu")
    assert all(not m._forward_pre_hooks for m in model.modules()), "the verdict removes its hooks"


def test_parameterless_mistakes_are_named():
    def follows_parameters(model, x, device):
        return model(x.to(next(model.parameters()).device))

    with pytest.raises(CheckFailed, match="StopIteration"):
        ch02.check_forward_parameterless(follows_parameters, nn.ReLU(), torch.ones(1), "cpu")
    with pytest.raises(CheckFailed, match="ran the module on an input on \\['cpu'\\]; expected meta"):
        ch02.check_forward_parameterless(lambda m, x, d: m(x), nn.Flatten(), torch.ones(2, 3), "meta")
    with pytest.raises(CheckFailed, match="got tensor"):
        ch02.check_forward_parameterless(lambda m, x, d: m(x) + 1, nn.ReLU(), torch.tensor([-1.0]), "cpu",
                                         expected=torch.tensor([0.0]))


def test_a_named_tuple_built_from_one_iterable_is_named():
    def from_iterable(batch, device):
        if isinstance(batch, torch.Tensor):
            return batch.to(device)
        if isinstance(batch, (list, tuple)):
            return type(batch)(from_iterable(v, device) for v in batch)
        return batch

    with pytest.raises(CheckFailed, match=r"one argument per field, Pair\(\*values\)"):
        ch02.check_keeps_structure(from_iterable, [Pair(torch.ones(1), 2)], "meta")


def test_a_type_error_without_a_named_tuple_is_not_explained_as_one():
    def broken(batch, device):
        raise TypeError("something else")

    with pytest.raises(TypeError, match="something else"):
        ch02.check_moves_flat(broken, [torch.ones(1)], "meta")


def test_to_on_a_string_is_named():
    def to_everything(batch, device):
        if isinstance(batch, (list, tuple)):
            return type(batch)(to_everything(v, device) for v in batch)
        return batch.to(device)

    with pytest.raises(CheckFailed, match="Only tensors have .to()"):
        ch02.check_keeps_structure(to_everything, [torch.ones(1), "label"], "meta")
