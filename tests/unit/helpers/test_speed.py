"""helpers.speed: the host-sync counter, the stand-in stream, compiling's costs, graph breaks, overlap in a trace.

Chapter 08 grades its first exercise with the counter, so these tests pin down what it must find (each kind of
host read, with the learner's line), what it must not (shapes, ``.to(device)``, arithmetic, torch's own
bookkeeping inside an optimizer) and that it leaves torch as it found it. Nothing here runs inductor's code
generation: ``torch.compile`` is exercised with ``backend="eager"`` and ``torch._dynamo.explain`` only.
"""

import inspect
import json
import logging
import math
import sys
import threading
import time
import types

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from helpers import device as dev
from helpers import speed
from helpers.benchmark import Timing

#: the course's device on a machine without a GPU, as pick_device names it: the device, though it is the CPU (only a
#: torch.device("cpu") written out in the call is read as the host)
DEVICE = torch.device("cpu")

# --------------------------------------------------------------------------- one host read per function
# Each reader does its read on the line just below its `def`, so the expected place is
# f"line {fn.__code__.co_firstlineno + 1} of {fn.__name__}()".


def read_item(t, mask):
    return t.sum().item()


def read_bool(t, mask):
    return bool(t.sum())


def read_if(t, mask):
    if t.sum():
        return 1
    return 0


def read_float(t, mask):
    return float(t.sum())


def read_print(t, mask):
    print(t)


def read_fstring(t, mask):
    return f"values {t}"


def read_tolist(t, mask):
    return t.tolist()


def read_cpu(t, mask):
    return t.cpu()


def read_numpy(t, mask):
    return t.numpy()


def read_nonzero(t, mask):
    return t.nonzero()


def read_mask(t, mask):
    return t[mask]


def read_equal(t, mask):
    return torch.equal(t, t + 0)


def read_to_cpu(t, mask):
    return t.sum().to("cpu")


def read_to_cpu_keyword(t, mask):
    return t.sum().to(device="cpu:0", dtype=torch.float64)


def read_into_host_tensor(t, mask):
    return t.to(torch.zeros(()))


def read_copy_into_host(t, mask):
    return torch.empty(4).copy_(t)


def read_setitem_into_host(t, mask):
    host = torch.zeros(3); host[0] = t.sum()  # noqa: E702 - the read must be on the line below the def
    return host


def read_mask_write(t, mask):
    t.clone()[mask] = t.sum()  # a device value: index_put_ runs nonzero (a Python number would be a masked fill)


def wait_tensor_on_device(t, mask):
    return torch.tensor([1.0, 2.0], device=t.device)


def wait_host_to_device(t, mask):
    return torch.ones(4).to(t.device)


def wait_host_copy_to_device(t, mask):
    return t.clone().copy_(torch.ones(4))


def wait_synchronize(t, mask):
    torch.accelerator.synchronize()


def wait_course_synchronize(t, mask):
    dev.synchronize(t.device)


READERS = [
    (read_item, ".item()"),
    (read_bool, "bool(t)"),
    (read_if, "`if t:`"),
    (read_float, "float(t)"),
    (read_print, "print(tensor)"),
    (read_fstring, "f-string"),
    (read_tolist, ".tolist()"),
    (read_cpu, ".cpu()"),
    (read_numpy, ".numpy()"),
    (read_nonzero, "nonzero"),
    (read_mask, "t[mask]"),
    (read_equal, "torch.equal"),
    (read_to_cpu, "blocking copy to the host"),
    (read_to_cpu_keyword, "blocking copy to the host"),
    (read_into_host_tensor, "blocking copy to the host"),
    (read_copy_into_host, "blocking copy to the host"),
    (read_setitem_into_host, "blocking copy to the host"),
    (read_mask_write, "t[mask] = other"),
]
#: what waits without reading a value: a copy *to* the device, an explicit synchronize
WAITERS = [
    (wait_tensor_on_device, "torch.tensor(..., device="),
    (wait_host_to_device, "blocking copy of a host tensor to the device"),
    (wait_host_copy_to_device, "blocking copy of a host tensor to the device"),
    (wait_synchronize, "torch.accelerator.synchronize()"),
    (wait_course_synchronize, "dev.synchronize()"),
]


def _place(fn, offset=1):
    return f"line {fn.__code__.co_firstlineno + offset} of {fn.__name__}()"


def _place_of(fn, text):
    """Where in ``fn`` the (first) line holding ``text`` is, as the counter names it."""
    lines, first = inspect.getsourcelines(fn)
    return _place(fn, next(i for i, line in enumerate(lines) if text in line))


def _data():
    t = torch.tensor([1.0, -2.0, 3.0, 4.0])
    return t, t > 0


@pytest.mark.parametrize("reader, kind", READERS, ids=[fn.__name__ for fn, _ in READERS])
def test_each_kind_of_host_read_is_counted_once_with_its_line_and_function(reader, kind):
    t, mask = _data()
    with speed.count_host_syncs() as syncs:
        reader(t, mask)
    assert len(syncs) == 1, syncs.summary()
    event = syncs.events[0]
    assert kind in event.kind
    assert event.where == _place(reader)
    assert str(event) == f"{event.kind} at {_place(reader)}"
    assert syncs.summary() == f"1 host sync(s): 1x {event}"
    assert event.read and syncs.reads == [event]


@pytest.mark.parametrize("waiter, kind", WAITERS, ids=[fn.__name__ for fn, _ in WAITERS])
def test_each_kind_of_wait_is_counted_once_with_its_line_as_a_wait_not_a_read(waiter, kind):
    t, mask = _data()
    with speed.count_host_syncs() as syncs:
        waiter(t, mask)  # torch.accelerator.synchronize() raises on a CPU-only build; counted, it waits for nothing
    assert len(syncs) == 1, syncs.summary()
    assert kind in str(syncs.events[0]) and syncs.events[0].where == _place(waiter)
    assert not syncs.events[0].read and syncs.reads == []
    assert syncs.intact


def host_tensors_only(t, mask):
    host = torch.zeros(4)  # made on the host: no device argument
    named = torch.ones(4, device="cpu")
    total = (host + named * 2).sum()
    host[1] = total  # host to host
    scalars = [host.tolist(), total.item(), float(named[0]), bool(total), str(host)]  # host values: free
    return scalars, total.to("cpu"), named.cpu()


def device_tensors_only(t, mask):
    buffer = torch.empty(3, device=t.device)  # made on the device, as the course's `device` names it
    buffer[0] = t.sum()  # device to device
    buffer[1:].copy_(t[:2])
    moved = t.to(t.device).to(torch.float64).to(t)  # already there: nothing moves
    scalar = torch.zeros((), device=t.device) + torch.tensor(2.0)  # a host scalar in arithmetic is not a copy
    async_copy = torch.ones(4).to(t.device, non_blocking=True)  # does not wait (from pinned memory it overlaps)
    return buffer, moved, scalar, async_copy


def test_host_tensors_are_read_for_free_and_device_tensors_move_without_waiting():
    t, mask = _data()
    with speed.count_host_syncs() as syncs:
        host_tensors_only(t, mask)
        device_tensors_only(t, mask)
    assert len(syncs) == 0, syncs.summary()


def test_a_host_buffer_written_in_a_loop_waits_once_per_step_and_a_device_buffer_never():
    t, _ = _data()
    for spelled, per_step in ((None, 1), ("cpu", 1), (t.device, 0)):
        with speed.count_host_syncs() as syncs:
            losses = torch.empty(5, device=spelled) if spelled is not None else torch.empty(5)
            for i in range(5):
                losses[i] = (t * i).sum()
        assert len(syncs) == 5 * per_step, (spelled, syncs.summary())


def test_a_grad_scaler_step_is_named_as_its_found_inf_read():
    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu")
    with speed.count_host_syncs() as syncs:
        scaler.scale(model(torch.randn(2, 4)).sum()).backward()
        scaler.step(optimizer)
        scaler.update()
    assert any("GradScaler.step" in str(e) for e in syncs.events), syncs.summary()


@pytest.mark.parametrize("t", [torch.arange(6.0), torch.arange(5000.0), torch.randn(40, 50, requires_grad=True),
                               torch.tensor(2.5)], ids=["six", "summarised", "requires_grad", "scalar"])
def test_printing_a_tensor_is_one_read_not_one_per_element(t, capsys):
    with speed.count_host_syncs() as syncs:
        read_print(t, None)
        read_fstring(t, None)
    assert capsys.readouterr().out.strip()  # it did print
    assert [e.where for e in syncs.events] == [_place(read_print), _place(read_fstring)]
    assert "print(tensor)" in syncs.events[0].kind and "f-string" in syncs.events[1].kind


def no_reads(model, optimizer, t, y):
    rows = len(t) + t.shape[0] + t.size(0) + t.numel() + t.dim()  # shapes are known on the host
    moved = t.to(t.device).to(torch.float64).to(t.dtype).detach().clone()  # .to(device) is not a read
    stacked = torch.stack([moved, moved * 2, moved + 1, moved.abs().sqrt()])
    picked = t[0] + t[1:].sum() + torch.where(t > 0, t, -t).max() + t.argmax()
    optimizer.zero_grad()
    loss = F.cross_entropy(model(stacked.T), y)
    loss.backward()
    optimizer.step()
    kept = [loss.detach() for _ in range(3)]
    return rows, torch.stack(kept).mean() + picked


def test_no_false_positives_for_shapes_moves_arithmetic_stack_and_an_sgd_step():
    t, _ = _data()
    model = nn.Linear(4, 3)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    y = torch.tensor([0, 1, 2, 0])
    with speed.count_host_syncs() as syncs:
        rows, total = no_reads(model, optimizer, t, y)
    assert rows == 4 * 3 + 4 + 1
    assert len(syncs) == 0, syncs.summary()
    assert syncs.summary() == "no host syncs" and syncs.by_place() == {}


def _adam_loop(steps, read_loss):
    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01, foreach=False)  # not fused: its step count is on the CPU
    x, y = torch.randn(8, 4), torch.randn(8, 2)
    with speed.count_host_syncs() as syncs:
        for _ in range(steps):
            optimizer.zero_grad()
            loss = F.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
            if read_loss:
                loss.item()  # the learner's read
    return syncs


def test_adams_own_step_counter_read_is_not_counted_but_the_learners_item_is():
    class CountScalarReads(TorchDispatchMode):
        reads = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func.overloadpacket is torch.ops.aten._local_scalar_dense:
                CountScalarReads.reads += 1
            return func(*args, **(kwargs or {}))

    model = nn.Linear(4, 2)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01, foreach=False)
    model(torch.randn(3, 4)).sum().backward()
    with CountScalarReads():
        optimizer.step()
    assert CountScalarReads.reads > 0  # Adam does read on the host: there is something the counter must leave out

    assert len(_adam_loop(4, read_loss=False)) == 0
    syncs = _adam_loop(4, read_loss=True)
    place = _place_of(_adam_loop, "loss.item()")
    assert [e.where for e in syncs.events] == [place] * 4, syncs.summary()
    assert ".item()" in syncs.events[0].kind


def per_step_item(steps):
    losses = []
    for _ in range(steps):
        loss = torch.randn(3, device=DEVICE).pow(2).mean()  # on the device, as pick_device names it
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("steps", [1, 3, 7])
def test_the_count_grows_with_the_loop(steps):
    with speed.count_host_syncs() as syncs:
        per_step_item(steps)
    assert len(syncs) == steps
    assert syncs.by_place() == {f"{syncs.events[0].kind} at {_place_of(per_step_item, '.item()')}": steps}
    assert syncs.summary().startswith(f"{steps} host sync(s): {steps}x ")


def test_by_place_sorts_the_most_frequent_first():
    t, mask = _data()
    with speed.count_host_syncs() as syncs:
        read_cpu(t, mask)
        for _ in range(3):
            read_item(t, mask)
    places = list(syncs.by_place().items())
    assert [n for _, n in places] == [3, 1]
    assert places[0][0].endswith(_place(read_item)) and places[1][0].endswith(_place(read_cpu))


def _synchronize_calls():
    return {(owner, name): getattr(owner, name) for owner, name in
            ((speed._owner(path), name) for path, name in speed.SYNCHRONIZE_CALLS) if owner is not None}


def test_synchronize_calls_are_restored_and_putting_one_back_is_seen():
    before = _synchronize_calls()
    with speed.count_host_syncs() as syncs:
        assert _synchronize_calls() != before
        torch.accelerator.synchronize = before[(torch.accelerator, "synchronize")]
        assert not syncs.watching()
    assert not syncs.intact
    assert _synchronize_calls() == before


def _tensor_methods():
    return {name: getattr(torch.Tensor, name) for name in speed.HOST_READ_METHODS}


def _own_attributes():
    return {name: vars(torch.Tensor).get(name, "absent") for name in speed.HOST_READ_METHODS}


def test_tensor_methods_are_restored_after_the_block():
    methods, own = _tensor_methods(), _own_attributes()
    t, mask = _data()
    with speed.count_host_syncs() as syncs:
        assert _tensor_methods() != methods  # patched while active
        read_tolist(t, mask)
    assert _tensor_methods() == methods and _own_attributes() == own
    read_item(t, mask), read_tolist(t, mask), read_nonzero(t, mask), read_print(t, mask)  # after the block:
    assert len(syncs) == 1  # neither the wrappers nor the dispatch mode record anything any more


@pytest.mark.parametrize("error", [ValueError("boom"), KeyboardInterrupt()])
def test_tensor_methods_are_restored_when_the_block_raises(error):
    methods, own = _tensor_methods(), _own_attributes()
    t, mask = _data()
    with pytest.raises(type(error)):
        with speed.count_host_syncs() as syncs:
            read_cpu(t, mask)
            raise error
    assert _tensor_methods() == methods and _own_attributes() == own
    read_item(t, mask), read_cpu(t, mask)
    assert len(syncs) == 1


def test_a_read_that_raises_still_counts_and_later_reads_are_counted_too():
    t, mask = _data()
    needs_grad = torch.ones(2, requires_grad=True)
    with speed.count_host_syncs() as syncs:
        with pytest.raises(RuntimeError):
            needs_grad.numpy()  # torch refuses: the wrapper must not stay "inside a read"
        read_item(t, mask)
    assert len(syncs) == 2, syncs.summary()
    assert ".numpy()" in syncs.events[0].kind and ".item()" in syncs.events[1].kind
    assert syncs.events[1].where == _place(read_item)


def test_the_counter_knows_whether_it_was_still_watching_at_the_end():
    methods = _tensor_methods()
    t, mask = _data()
    with speed.count_host_syncs() as syncs:
        assert syncs.watching()
        read_item(t, mask)
    assert syncs.intact and not syncs.watching()  # after the block nothing watches any more
    with speed.count_host_syncs() as syncs:
        torch.Tensor.tolist = methods["tolist"]  # code in the block puts torch's own method back
        assert not syncs.watching()
        read_tolist(t, mask)  # so this read goes unseen
    assert not syncs.intact and len(syncs) == 0
    assert _tensor_methods() == methods and "tolist" not in vars(torch.Tensor)


def test_torch_tensor_of_a_list_of_tensors_counts_a_read_per_element():
    losses = [torch.tensor(float(i)) for i in range(5)]
    with speed.count_host_syncs() as syncs:
        torch.tensor(losses)
    assert len(syncs) >= len(losses)


# --------------------------------------------------------------------------- review 3: W4, W5, N6, N7


def mask_fills(t, steps):
    for _ in range(steps):
        x = t.clone()
        x[x < 0] = 0.0  # a Python number: masked_fill_ on a GPU, no sync
        x[x > 3] = torch.tensor(1.0)  # one element on the host: the same
    return x


def test_a_number_written_through_a_mask_is_a_masked_fill_not_a_sync():
    t, _ = _data()
    with speed.count_host_syncs() as syncs:
        mask_fills(t, 3)
    assert len(syncs) == 0, syncs.summary()


def to_host_device_object(t, steps):
    kept = []
    for _ in range(steps):
        kept.append(t.sum().to(torch.device("cpu")))  # written out: a copy to the host
        kept.append(t.to(DEVICE))  # the course's device, the same object here: nothing moves
    return kept


def test_a_torch_device_cpu_written_out_is_a_copy_to_the_host_and_the_courses_device_is_not():
    t, _ = _data()
    with speed.count_host_syncs() as syncs:
        kept = to_host_device_object(t, 3)
        free = [float(v) for v in kept[::2]]  # copied to the host: read for free
    assert syncs.by_place() == {f"{speed._(speed.TO_HOST)} at {_place_of(to_host_device_object, 'cpu')}": 3}, \
        syncs.summary()
    assert len(free) == 3


BUFFER = torch.zeros(8)  # made before the counter, as in a learner's cell: on the host
SCALE = torch.tensor(0.5)  # a host constant from before: reading it waits for nothing


def into_old_buffer(t, steps):
    for i in range(steps):
        BUFFER[i] = t.sum() * float(SCALE)
    return BUFFER


def read_parameter(model):
    return model.weight.sum().item()  # a parameter handed in: on the device


@pytest.mark.parametrize("steps", [2, 5])
def test_tensors_from_before_the_block_are_the_hosts_unless_handed_in_as_the_devices(steps):
    t, _ = _data()
    model = nn.Linear(4, 2)
    with speed.count_host_syncs(device_tensors=[t, model]) as syncs:
        into_old_buffer(t, steps)
        read_parameter(model)
    item = speed._(speed.SYNC_OPS["aten._local_scalar_dense"])
    assert syncs.by_place() == {f"{speed._(speed.TO_HOST)} at {_place(into_old_buffer, 2)}": steps,
                                f"{item} at {_place(read_parameter)}": 1}, syncs.summary()
    with speed.count_host_syncs() as syncs:  # nothing named: everything from before stands for the device
        into_old_buffer(t, steps)
    assert [e.kind for e in syncs.events] == [speed.SYNC_OPS["aten._local_scalar_dense"]] * steps, syncs.summary()


def from_numpy_each_step(t, steps):
    import numpy as np

    for _ in range(steps):
        t = t + torch.from_numpy(np.ones(4, dtype="float32")).to(t.device)
    return t


def test_from_numpy_is_a_host_tensor_and_its_move_to_the_device_waits():
    t, _ = _data()
    with speed.count_host_syncs() as syncs:
        from_numpy_each_step(t, 3)
    place = _place_of(from_numpy_each_step, "torch.from_numpy")
    assert syncs.by_place() == {f"{speed._(speed.TO_DEVICE)} at {place}": 3}
    assert syncs.intact


def host_indices(t, steps):
    for _ in range(steps):
        t[torch.randperm(len(t))].sum()
        t.index_select(0, torch.arange(2))
        t[torch.arange(2, device=t.device)]  # on the device: nothing waits
    return t


def test_a_host_index_into_a_device_tensor_is_a_blocking_copy_of_the_index():
    t, _ = _data()
    with speed.count_host_syncs() as syncs:
        host_indices(t, 3)
    kind = speed._(speed.HOST_INDEX)
    assert syncs.by_place() == {f"{kind} at {_place_of(host_indices, 'randperm')}": 3,
                                f"{kind} at {_place_of(host_indices, 'index_select')}": 3}, syncs.summary()
    assert syncs.reads == []


def host_total(t, steps):
    total, kept = torch.zeros(()), torch.zeros((), device=t.device)
    for _ in range(steps):
        total += t.sum()  # raises on a GPU: a host output, a device input
        kept += t.sum()
    return total, kept


def test_a_host_tensor_updated_in_place_from_a_device_tensor_is_kept_as_what_raises():
    t, _ = _data()
    with speed.count_host_syncs() as syncs:
        host_total(t, 3)
    assert len(syncs) == 0, syncs.summary()
    assert [e.where for e in syncs.raises] == [_place_of(host_total, "total +=")] * 3
    assert "total += loss" in str(syncs.raises[0])


def lesser_syncs(t, steps):
    import io

    counts = t.abs().long()
    for _ in range(steps):
        torch.cuda.empty_cache()
        counts.bincount()
        counts.unique_consecutive()
        t.histc(bins=4)
        t.histc(bins=4, min=-5, max=5)  # a range given: nothing read
        torch.save(t, io.BytesIO())
        torch.save(torch.ones(2), io.BytesIO())  # a host tensor: nothing copied
    return counts


def test_empty_cache_bincount_unique_consecutive_histc_and_save_of_a_device_tensor_are_counted():
    t, _ = _data()
    with speed.count_host_syncs() as syncs:
        lesser_syncs(t, 2)
    counted = {place: n for place, n in syncs.by_place().items()}
    where = {text: _place_of(lesser_syncs, text) for text in
             ("empty_cache", "bincount", "unique_consecutive", "histc(bins=4)", "torch.save(t,")}
    assert sorted(counted.values()) == [2] * 5 and len(syncs) == 10, syncs.summary()
    for text, place in where.items():
        assert any(key.endswith(f"at {place}") for key in counted), (text, syncs.summary())
    assert syncs.intact


def copied_then_read(t, steps):
    losses = [t.sum() * i for i in range(steps)]
    values = [float(v) for v in torch.stack(losses).to("cpu")]
    values += [float(v) for v in torch.stack(losses).cpu()]
    values += [float(v) for v in torch.stack(losses).tolist()]
    return values


@pytest.mark.parametrize("steps", [2, 6])
def test_a_copy_to_the_host_then_reads_of_its_elements_is_one_read(steps):
    t, _ = _data()
    with speed.count_host_syncs() as syncs:
        copied_then_read(t, steps)
    assert len(syncs) == 3 and len(syncs.reads) == 3, syncs.summary()


# --------------------------------------------------------------------------- the stand-in stream


def _sleeper(seconds):
    return lambda: time.sleep(seconds)


def _background_threads():
    return sum(thread.name == "BackgroundQueue" for thread in threading.enumerate())


@pytest.mark.parametrize("sync_every_step", [True, False])
def test_queued_steps_records_every_piece_of_work(sync_every_step):
    steps = 4
    run = speed.queued_steps(_sleeper(0.01), _sleeper(0.002), steps=steps, sync_every_step=sync_every_step)
    assert len(run.lanes["host"]) == steps and len(run.lanes["stream"]) == steps
    assert len(run.lanes["host waits"]) == (steps + 1 if sync_every_step else 1)  # one a step, then the final one
    for lane in run.lanes.values():
        assert all(0 <= a <= b <= run.seconds for a, b in lane)
    assert all(b - a >= 0.009 for a, b in run.lanes["stream"])
    assert run.host_wait_s > 0
    assert run.host_wait_s == pytest.approx(sum(b - a for a, b in run.lanes["host waits"]))
    assert run.seconds >= sum(b - a for a, b in run.lanes["stream"])  # the stream runs its work in order


def test_a_sync_every_step_serialises_host_and_stream_and_none_lets_them_overlap():
    every = speed.queued_steps(_sleeper(0.03), _sleeper(0.03), steps=4, sync_every_step=True)
    host, stream, waits = every.lanes["host"], every.lanes["stream"], every.lanes["host waits"]
    for i in range(4):
        assert stream[i][0] >= host[i][1]  # queued after the host's share of the step
        assert waits[i][1] >= stream[i][1]  # the host waited until it was done
        if i + 1 < 4:
            assert host[i + 1][0] >= stream[i][1]  # no host work while the stream ran
    once = speed.queued_steps(_sleeper(0.03), _sleeper(0.03), steps=4, sync_every_step=False)
    host, stream = once.lanes["host"], once.lanes["stream"]
    assert any(host[i + 1][0] < stream[i][1] for i in range(3))  # the next step's host work ran beside the stream
    assert once.lanes["host waits"][0][1] >= stream[-1][1]


@pytest.mark.parametrize("sync_every_step", [True, False])
def test_an_error_in_device_work_surfaces_and_the_stream_stops(sync_every_step):
    threads = _background_threads()

    def fails():
        raise ValueError("device work failed")

    with pytest.raises(ValueError, match="device work failed"):
        speed.queued_steps(fails, _sleeper(0), steps=3, sync_every_step=sync_every_step)
    assert _background_threads() == threads


# --------------------------------------------------------------------------- overlap, read from a trace


def _event(cat, start, end, name="kernel", ph="X"):
    return {"ph": ph, "cat": cat, "name": name, "ts": start, "dur": end - start, "pid": 0, "tid": 7}


def _trace(copies=(), kernels=(), others=()):
    events = [_event("gpu_memcpy", a, b, name="Memcpy HtoD (Pinned -> Device)") for a, b in copies]
    events += [_event("kernel", a, b, name="void gemm_kernel<float>") for a, b in kernels]
    return {"schemaVersion": 1, "traceEvents": events + list(others)}


@pytest.mark.parametrize("copies, kernels, copy_us, kernel_us, both_us", [
    ([(0, 100)], [(0, 200)], 100, 200, 100),  # the copy ran wholly during a kernel
    ([(0, 100)], [(100, 200)], 100, 100, 0),  # one after the other: touching is not overlapping
    ([(0, 100)], [(150, 200)], 100, 50, 0),
    ([(0, 100)], [(50, 150)], 100, 100, 50),  # partly
    ([(0, 10), (20, 30)], [(5, 25)], 20, 20, 10),  # one kernel across two copies
    ([(0, 100)], [(10, 20), (40, 50), (90, 300)], 100, 230, 30),  # three kernels inside one copy
    ([(0, 60), (40, 100)], [(0, 100)], 100, 100, 100),  # overlapping copies are merged, not counted twice
    ([(200, 300), (0, 100)], [(250, 260), (50, 60)], 200, 20, 20),  # events need not come in time order
], ids=["full", "none-touching", "none", "partial", "two-copies", "three-kernels", "merged", "unordered"])
def test_copy_compute_overlap_measures_the_intersection(copies, kernels, copy_us, kernel_us, both_us):
    overlap = speed.copy_compute_overlap(_trace(copies, kernels))
    assert overlap.copy_s == pytest.approx(copy_us / 1e6)
    assert overlap.kernel_s == pytest.approx(kernel_us / 1e6)
    assert overlap.both_s == pytest.approx(both_us / 1e6)
    assert overlap.fraction == pytest.approx(both_us / copy_us)


def test_copy_compute_overlap_ignores_device_to_host_copies_and_other_events():
    others = [
        _event("gpu_memcpy", 100, 400, name="Memcpy DtoH (Device -> Pageable)"),  # a copy back: not counted
        _event("gpu_memcpy", 100, 400, name="Memcpy HtoD (Pinned -> Device)", ph="i"),  # not a complete event
        _event("cpu_op", 0, 400, name="aten::copy_"),  # the host side of a copy
        _event("gpu_memset", 100, 400, name="Memset (Device)"),
        {"ph": "M", "name": "process_name", "args": {"name": "python"}},  # metadata, no ts
    ]
    overlap = speed.copy_compute_overlap(_trace([(0, 100)], [(100, 400)], others))
    assert overlap.both_s == 0 and overlap.copy_s == pytest.approx(1e-4) and overlap.kernel_s == pytest.approx(3e-4)
    assert overlap.fraction == 0
    assert math.isnan(speed.copy_compute_overlap(_trace([], [(0, 10)])).fraction)  # no copies: nothing to share


def test_copy_compute_overlap_reads_a_trace_file(tmp_path):
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(_trace([(0, 100)], [(50, 150)])))
    assert speed.copy_compute_overlap(path) == speed.copy_compute_overlap(str(path))
    assert speed.copy_compute_overlap(path).fraction == pytest.approx(0.5)


def _launch(name, start, cat="cuda_runtime"):
    return _event(cat, start, start + 3, name=name)


def test_count_kernels_counts_device_kernels_and_host_launches_per_call():
    """Two calls: eagerly, two kernels each, launched by the runtime (cuBLAS) and the driver (Triton); then a
    CUDA graph's replay, whose two kernels still run and show, from one launch."""
    eager = [_launch("cudaLaunchKernel", 0), _launch("cuLaunchKernel", 10, cat="cuda_driver"),
             _event("kernel", 5, 9, name="sm90_xmma_gemm"), _event("kernel", 12, 15, name="triton_poi_fused_gelu_0")]
    eager += [dict(e, ts=e["ts"] + 100) for e in eager]
    others = [_event("cuda_runtime", 0, 1, name="cudaStreamSynchronize"), _event("cuda_runtime", 0, 1, name="cudaMemcpyAsync"),
              _event("cpu_op", 0, 30, name="aten::addmm"), _event("gpu_memcpy", 0, 2, name="Memcpy DtoD (Device -> Device)"),
              _event("kernel", 0, 1, name="not complete", ph="i"), {"ph": "M", "name": "process_name", "args": {}}]
    trace = {"traceEvents": eager + others}
    assert speed.count_kernels(trace, calls=2) == speed.KernelCount(kernels=2, launches=2)
    assert speed.count_kernels(trace) == speed.KernelCount(kernels=4, launches=4)
    replay = [_launch("cudaGraphLaunch", 0), _event("kernel", 4, 8, name="sm90_xmma_gemm"),
              _event("kernel", 8, 10, name="triton_poi_fused_gelu_0"), _launch("cudaLaunchKernelExC", 20),
              _event("kernel", 22, 23, name="gemv")]
    assert speed.count_kernels({"traceEvents": replay}) == speed.KernelCount(kernels=3, launches=2)
    assert speed.count_kernels({"traceEvents": []}, calls=3) == speed.KernelCount(0, 0)


def test_count_kernels_reads_a_trace_file(tmp_path):
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": [_launch("cudaLaunchKernel", 0), _event("kernel", 1, 2)]}))
    assert speed.count_kernels(path) == speed.count_kernels(str(path)) == speed.KernelCount(1, 1)


def test_size_for_balance_finds_where_device_time_catches_up_with_host_time():
    host_s = 1e-3

    def step(size):  # a loop without syncs takes max(host, device) a step
        return max(host_s, size * 1e-6)

    assert speed.size_for_balance(step, [64, 128, 256, 512, 1024, 2048, 4096]) == (2048, host_s, 2048e-6)
    assert speed.size_for_balance(step, [64, 128, 256]) == (256, host_s, host_s)  # never caught up: the last
    asked = []
    speed.size_for_balance(lambda size: asked.append(size) or max(host_s, size * 1e-6), [64, 2048, 4096])
    assert set(asked) == {64, 2048}  # stops at the first size that balances
    assert asked[:6] == [64, 64, 64, 2048, 2048, 2048]  # each size read `repeats` times,
    assert asked[6:] == [2048, 64] * 3  # then the crossing confirmed, interleaved with the smallest size
    with pytest.raises(ValueError):
        speed.size_for_balance(step, [])
    with pytest.raises(ValueError):
        speed.size_for_balance(step, [64], repeats=0)


def test_size_for_balance_keeps_the_least_reading_so_one_slow_moment_picks_no_size():
    """A CI run with every core busy read a host-bound size 1.5x slower once, and the chapter then compared its two
    loops where the device idled: the syncs cost nothing there, and the noise printed the noisy loop faster."""
    host_s = 1e-3
    readings: dict[int, int] = {}

    def step(size):  # the host's time, but the first reading of 256 comes in a slow moment (twice as long)
        readings[size] = readings.get(size, 0) + 1
        slow = 2.0 if size == 256 and readings[size] == 1 else 1.0
        return slow * max(host_s, size * 1e-6)

    assert speed.size_for_balance(step, [64, 128, 256, 512, 1024, 2048]) == (2048, host_s, 2048e-6)

    def loaded(size):  # every reading of 256 is slow until it is confirmed: a load that then goes away
        readings[size] = readings.get(size, 0) + 1
        slow = 2.0 if size == 256 and readings[size] <= 3 else 1.0
        return slow * max(host_s, size * 1e-6)

    readings.clear()
    assert speed.size_for_balance(loaded, [64, 128, 256, 512, 1024, 2048])[0] == 2048
    # a load on every reading alike moves nothing: each is compared with the host's time read beside it
    assert speed.size_for_balance(lambda size: 1.7 * step(size), [64, 128, 256, 512, 1024, 2048])[0] == 2048


# --------------------------------------------------------------------------- torch.compile


@pytest.fixture
def no_compilers(monkeypatch):
    """No C++ compiler on PATH, and inductor's own setting names one that does not exist either.

    inductor's config is patched with its own ``config.patch``: pytest's monkeypatch cannot put a value back
    on its sub-config proxy (the attribute is gone after ``undo()``), which would break inductor for later tests.
    """
    from torch._inductor import config

    monkeypatch.setattr(speed.shutil, "which", lambda name, *args, **kwargs: None)
    with config.patch({"cpp.cxx": (None, "no-such-compiler++")}):
        yield config
    assert config.cpp.cxx == config._config["cpp.cxx"].default  # put back


def test_compiler_missing_is_none_on_this_cpu():
    assert speed.compiler_missing("cpu") is None
    assert speed.compiler_missing(torch.device("cpu")) is None


def test_compiler_missing_names_the_cpp_compiler_when_path_has_none(no_compilers):
    reason = speed.compiler_missing("cpu")
    assert reason and "C++ compiler" in reason


def test_compiler_missing_uses_inductors_configured_compiler(no_compilers, monkeypatch):
    compiler = "/opt/cc/bin/my-g++"
    monkeypatch.setattr(speed.shutil, "which", lambda name, *args, **kwargs: name if name == compiler else None)
    with no_compilers.patch({"cpp.cxx": (None, compiler)}):
        assert speed.compiler_missing("cpu") is None
    assert speed.compiler_missing("cpu") is not None  # the setting back to one that does not exist


def test_compiler_missing_for_cuda_asks_for_triton(monkeypatch):
    monkeypatch.setitem(sys.modules, "triton", None)  # `import triton` raises ImportError
    for device in ("cuda", "cuda:0", torch.device("cuda", 0)):
        reason = speed.compiler_missing(device)
        assert reason and "triton" in reason
    monkeypatch.setitem(sys.modules, "triton", types.ModuleType("triton"))
    assert speed.compiler_missing("cuda") is None


def with_breaks(x):
    y = torch.relu(x) * 2
    m = y.mean().item()
    if y.sum() > 0:
        y = y - 1
    return y.softmax(dim=-1) * m


def without_breaks(x):
    y = torch.relu(x) * 2
    y = torch.where(y.sum() > 0, y - 1, y)
    return y.softmax(dim=-1)


def test_graph_breaks_name_the_item_and_the_control_flow_with_their_lines():
    dynamo_level = logging.getLogger("torch._dynamo").level
    found = speed.graph_breaks(with_breaks, torch.randn(8, 16))
    assert found.breaks == len(found.reasons) >= 2 and found.graphs == found.breaks + 1
    item = [r for r in found.reasons if r.endswith(f"({_place_of(with_breaks, '.item()')})")]
    control = [r for r in found.reasons if r.endswith(f"({_place_of(with_breaks, 'if y.sum()')})")]
    assert item and "item" in item[0], found.reasons
    assert control and "control flow" in control[0], found.reasons
    assert str(found).splitlines()[:2] == [f"{found.graphs} graph(s), {found.breaks} graph break(s)",
                                           f"  break 1: {found.reasons[0]}"]
    assert logging.getLogger("torch._dynamo").level == dynamo_level


def test_a_function_without_breaks_is_one_graph():
    found = speed.graph_breaks(without_breaks, torch.randn(8, 16))
    assert (found.graphs, found.breaks, found.reasons) == (1, 0, [])
    assert str(found) == "1 graph(s), 0 graph break(s)"


def test_compile_timings_with_the_eager_backend_times_both_interleaved():
    import torch._dynamo

    x = torch.randn(8, 16)
    try:
        timings = speed.compile_timings(without_breaks, (x,), "cpu", repeats=4, calls=2, label="tiny",
                                        backend="eager")
    finally:
        torch._dynamo.reset()
    assert isinstance(timings, speed.CompileTimings)
    assert isinstance(timings.eager, Timing) and isinstance(timings.compiled, Timing)
    assert len(timings.eager.times) == 4 and len(timings.compiled.times) == 4
    assert all(t > 0 for t in timings.eager.times + timings.compiled.times)
    assert (timings.eager.label, timings.compiled.label) == ("tiny, eager", "tiny, compiled")
    assert timings.eager.device == "cpu"
    assert timings.first_call_s > 0 and timings.compile_s >= 0
    assert timings.compile_s == pytest.approx(max(timings.first_call_s - timings.compiled.median, 0.0))


def test_compile_s_is_the_first_call_less_a_steady_call_never_negative():
    steady = Timing.from_times([0.2, 0.25, 0.3])
    assert speed.CompileTimings(1.0, steady, steady).compile_s == pytest.approx(0.75)
    assert speed.CompileTimings(0.1, steady, steady).compile_s == 0.0


@pytest.mark.parametrize("patch", ["counter", "mode"])
def test_a_counter_patched_through_the_mode_stack_is_not_intact(patch):
    """The dispatch mode is reachable from any code (torch lists its modes): a count switched off through it is
    found, so a check refuses to trust the count."""
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

    def quiet_loop():
        mode = next(m for m in _get_current_dispatch_mode_stack() if hasattr(m, "counter"))
        if patch == "counter":
            mode.counter._record = lambda *args, **kwargs: None
        else:
            mode.counter = speed.SyncCounter()  # the mode counts into another counter
        return torch.ones(3, device=DEVICE).sum().item()

    with speed.count_host_syncs() as counter:
        quiet_loop()
    assert not counter.intact


def test_a_counter_left_alone_is_intact():
    with speed.count_host_syncs() as counter:
        torch.ones(3, device=DEVICE).sum().item()
    assert counter.intact and len(counter) == 1
