"""helpers.device.demo_sizes: chapter 01's GPU demos sized from the device's properties, checked on the CPU.

A demo measures what it teaches only when its work is large enough: an add whose tensors fit in the L2
cache measures the cache, and a product shorter than its launch measures the launch rate (issue 23,
finding 4). The properties here are faked: an H100-like GPU (50 MiB L2, 80 GiB) and a T4-like one
(4 MiB L2, 15 GiB, 40 SMs), as ``torch.cuda.get_device_properties`` reports them.
"""

from types import SimpleNamespace

import nbformat
import pytest
import torch

from support.layout import solution_path
from helpers import device as dev
from helpers.checks import fake_machine

MiB, GiB = 2**20, 2**30
H100 = SimpleNamespace(name="H100-like", L2_cache_size=50 * MiB, total_memory=80 * GiB, multi_processor_count=132)
T4 = SimpleNamespace(name="T4-like", L2_cache_size=4 * MiB, total_memory=15 * GiB, multi_processor_count=40)
# measured-like figures: a tiny kernel's call, and float32 product throughput
GPUS = [(H100, 5e-6, 5e13), (T4, 8e-6, 4.5e12)]


def _working_set(n):
    return 3 * n * n * 4  # two float32 n x n tensors read, one written


@pytest.mark.parametrize("props, launch_s, flops", GPUS, ids=["H100", "T4"])
def test_the_stream_demo_is_several_times_the_l2_cache_and_the_product_dwarfs_its_launch(props, launch_s, flops):
    sizes = dev.demo_sizes("cuda", launch_s=launch_s, flops_per_s=flops, properties=props)
    assert _working_set(sizes.stream_n) >= 8 * props.L2_cache_size
    assert _working_set(sizes.stream_n // 2) < 8 * props.L2_cache_size  # the smallest such power of two
    assert _working_set(sizes.stream_n) <= props.total_memory / 8
    assert 2 * sizes.matmul_n**3 / flops >= 50 * launch_s  # the launch is at most 2 % of one product
    assert (sizes.matmul_n // 128) ** 2 >= props.multi_processor_count  # every SM has a tile of the result
    assert "L2" in sizes.reason and "launch cost" in sizes.reason


def test_an_h100_and_a_t4_get_the_sizes_their_caches_and_launch_costs_ask_for():
    """The finding's case: n=1024 (12 MiB) fits in an H100's 50 MiB L2, and a 512 product is about its launch."""
    h100 = dev.demo_sizes("cuda", launch_s=5e-6, flops_per_s=5e13, properties=H100)
    t4 = dev.demo_sizes("cuda", launch_s=8e-6, flops_per_s=4.5e12, properties=T4)
    assert (h100.stream_n, h100.matmul_n) == (8192, 2048)
    assert (t4.stream_n, t4.matmul_n) == (2048, 1024)
    assert _working_set(1024) < H100.L2_cache_size and 2 * 512**3 / 5e13 < 10 * 5e-6


def test_a_slower_launch_asks_for_more_work_per_kernel():
    quick = dev.demo_sizes("cuda", launch_s=2e-6, flops_per_s=4.5e12, properties=T4).matmul_n
    slow = dev.demo_sizes("cuda", launch_s=50e-6, flops_per_s=4.5e12, properties=T4).matmul_n
    assert slow > quick


def test_a_small_gpu_memory_caps_the_sizes():
    small = SimpleNamespace(L2_cache_size=50 * MiB, total_memory=1 * GiB, multi_processor_count=132)
    sizes = dev.demo_sizes("cuda", launch_s=5e-6, flops_per_s=5e13, properties=small)
    assert _working_set(sizes.stream_n) <= GiB / 8 and _working_set(sizes.matmul_n) <= GiB / 8
    assert "wanted 8x" in sizes.reason  # it says it could not reach the cache multiple


def test_without_a_measured_launch_cost_the_product_still_fills_the_gpu():
    sizes = dev.demo_sizes("cuda", properties=H100)
    assert (sizes.matmul_n // 128) ** 2 >= 132 and "no launch cost measured" in sizes.reason


def test_the_cpu_keeps_sizes_that_run_fast_and_mps_without_a_cache_size_keeps_the_cpus_stream():
    assert (dev.demo_sizes("cpu").stream_n, dev.demo_sizes(torch.device("cpu")).matmul_n) == (1024, 512)
    mps = dev.demo_sizes("mps", properties=SimpleNamespace())
    assert mps.stream_n == 1024 and "no cache size" in mps.reason


def test_the_properties_are_read_from_torch_on_cuda():
    with fake_machine(cuda=1):
        real = torch.cuda.get_device_properties
        torch.cuda.get_device_properties = lambda device=None: T4
        try:
            assert dev.demo_sizes("cuda", launch_s=8e-6, flops_per_s=4.5e12).stream_n == 2048
        finally:
            torch.cuda.get_device_properties = real


def test_chapter_01s_gpu_demos_take_their_sizes_from_demo_sizes_and_conclude_through_compare():
    """The finding's cells: the kinds demo (c011) and the synchronisation demo (c015) once hard-coded n=1024 and
    n=512, which an H100 holds in L2 or launches faster than it computes; the events demo (c015b) is new."""
    cells = {c.id: c.source for c in nbformat.read(str(solution_path("01_why_gpus")), as_version=4).cells}
    assert "dev.demo_sizes(device" in cells["c010a"] and "get_device_properties" in cells["c010a"]
    assert "n = demo.stream_n" in cells["c011"] and "launch_s / copy.median" in cells["c011"]
    assert "demo.matmul_n" in cells["c015"] and "bench.compare(" in cells["c015"]
    assert "demo.matmul_n" in cells["c015b"] and "torch.cuda.Event(enable_timing=True)" in cells["c015b"]
    assert "end.synchronize()" in cells["c015b"] and "elapsed_time(end) / 1000" in cells["c015b"]
