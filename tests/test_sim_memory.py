"""The simulator's memory is real: heap buffers, DMA buffers, shared pages, the DMA total."""
from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from rknnlab import models
from rknnlab.rknn import abi, buffers, errors
from rknnlab.sim import SimRuntime
from rknnlab.sim.sram import sram_for

LIB = Path(__file__).resolve().parents[1] / "lib"


@pytest.fixture
def rt():
    runtime = SimRuntime("rk3588")
    yield runtime
    runtime.close()


def _model(name: str, soc: str = "rk3588") -> str:
    return str(models.model_path(name, soc))


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def _dma_total(rt: SimRuntime, ctx: int) -> int:
    return rt.query(ctx, abi.RKNN_QUERY_MEM_SIZE).total_dma_allocated_size


def _digits_input(rt: SimRuntime, ctx: int) -> None:
    image = np.arange(64, dtype=np.uint8).reshape(1, 8, 8, 1)
    rt.inputs_set(ctx, [buffers.input_from_array(0, image, abi.RKNN_TENSOR_NHWC)])


def test_init_allocates_weights_internal_and_io(rt):
    ctx = rt.init(_model("mobilenet_v2"))
    report = models.load_report("mobilenet_v2")
    size = rt.query(ctx, abi.RKNN_QUERY_MEM_SIZE)
    io = sum((t["native"]["size_with_stride"] for t in report.data["inputs"] + report.data["outputs"]))
    assert size.total_weight_size == report.total_weight_size
    assert size.total_internal_size == report.total_internal_size
    assert size.total_dma_allocated_size == report.total_weight_size + report.total_internal_size + io
    # the NPU's SRAM reservation and what is free of it, for a flag-0 context too (A53)
    assert (size.total_sram_size, size.free_sram_size) == (978_944, sram_for("rk3588").free_bytes)


def test_dma_total_rises_and_falls_with_create_mem(rt):
    ctx = rt.init(_model("digits_cnn"))
    before = _dma_total(rt, ctx)
    mem = rt.create_mem(ctx, 1_000_001)
    assert _dma_total(rt, ctx) == before + 1_000_001
    other = rt.create_mem2(0, 4096, abi.RKNN_MEM_FLAG_ALLOC_NO_CONTEXT)  # belongs to no context
    shared = rt.create_mem_from_fd(ctx, mem.contents.fd, mem.contents.virt_addr, 4096, 0)
    assert _dma_total(rt, ctx) == before + 1_000_001
    rt.destroy_mem(ctx, mem)
    assert _dma_total(rt, ctx) == before
    rt.destroy_mem(ctx, shared)
    rt.destroy_mem(0, other)


def test_create_mem_is_a_real_shared_mapping_backed_at_allocation(rt):
    ctx = rt.init(_model("digits_cnn"))
    size = 16 << 20
    shmem_before = _status_kb("RssShmem")
    mem = rt.create_mem(ctx, size)
    assert _status_kb("RssShmem") - shmem_before >= size // 1024 * 0.95  # pages taken now (A1, A2)
    struct = mem.contents
    assert struct.fd >= 3 and os.fstat(struct.fd).st_size == size
    assert struct.flags == abi.RKNN_TENSOR_MEMORY_FLAGS_ALLOC_INSIDE
    assert struct.virt_addr % os.sysconf("SC_PAGE_SIZE") == 0
    rt.destroy_mem(ctx, mem)
    assert _status_kb("RssShmem") - shmem_before < size // 1024 * 0.05


def test_create_mem_from_fd_shares_pages(rt):
    ctx = rt.init(_model("digits_cnn"))
    first = rt.create_mem(ctx, 3 * 4096)
    second = rt.create_mem_from_fd(ctx, first.contents.fd, first.contents.virt_addr, 3 * 4096, 4096)
    assert second.contents.flags == abi.RKNN_TENSOR_MEMORY_FLAGS_FROM_FD
    assert second.contents.fd == first.contents.fd and second.contents.offset == 4096
    assert second.contents.virt_addr != first.contents.virt_addr  # a second mapping (A8) ...
    a = buffers.mem_view(first)
    b = buffers.mem_view(second)
    a[5000:5004] = [1, 2, 3, 4]
    assert b[5000:5004].tolist() == [1, 2, 3, 4]  # ... of the same pages
    b[100] = 42
    assert a[100] == 42
    rt.destroy_mem(ctx, first)  # closes the fd; the second mapping keeps the pages
    assert b[5001] == 2
    rt.destroy_mem(ctx, second)


def test_prealloc_get_writes_into_the_callers_buffer(rt):
    ctx = rt.init(_model("mobilenet_v2"))
    rt.inputs_set(ctx, [buffers.input_from_array(
        0, np.full((1, 224, 224, 3), 128, np.uint8), abi.RKNN_TENSOR_NHWC)])
    rt.run(ctx)
    caller = np.zeros(1000, np.float32)
    output = abi.rknn_output(want_float=1, is_prealloc=1, index=0, buf=caller.ctypes.data, size=caller.nbytes)
    for _ in range(5):
        rt.outputs_get(ctx, [output])
        assert output.buf == caller.ctypes.data
        rt.outputs_release(ctx, [output])  # nothing to free, nothing changed
        assert output.buf == caller.ctypes.data
    assert caller.any()


_LEAK_SCRIPT = textwrap.dedent("""
    import ctypes, json
    import numpy as np
    from rknnlab import models
    from rknnlab.rknn import abi, buffers
    from rknnlab.sim import SimRuntime

    def rss():
        # free heap pages left by earlier work would absorb new mallocs unseen:
        # hand them back first, as a measurement on a board should
        ctypes.CDLL(None).malloc_trim(0)
        for line in open("/proc/self/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024

    rt = SimRuntime()
    ctx = rt.init(str(models.model_path("mobilenet_v2")))
    image = np.full((1, 224, 224, 3), 100, np.uint8)
    rt.inputs_set(ctx, [buffers.input_from_array(0, image, abi.RKNN_TENSOR_NHWC)])
    rt.run(ctx)
    def get(release):
        out = abi.rknn_output(want_float=1, is_prealloc=0, index=0)
        rt.outputs_get(ctx, [out])
        if release:
            rt.outputs_release(ctx, [out])
        return out.size
    for _ in range(200):
        get(True)
    start = rss()
    for _ in range(1000):
        get(True)
    with_release = rss() - start
    start = rss()
    for _ in range(1000):
        size = get(False)
    without_release = rss() - start
    print(json.dumps({"size": size, "with": with_release, "without": without_release}))
""")


def test_outputs_get_without_release_leaks_for_real():
    """A3: each is_prealloc=0 get mallocs; 1,000 gets without release grow RSS by
    about 1,000 x the output size (measured in a fresh process: a clean heap)."""
    pytest.importorskip("onnxruntime")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(LIB), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-c", _LEAK_SCRIPT], capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    import json
    result = json.loads(done.stdout.strip().splitlines()[-1])
    expected = 1000 * result["size"]
    assert result["size"] == 4000
    assert 0.7 * expected <= result["without"] <= 1.5 * expected, result
    assert result["with"] < 0.1 * expected, result


def test_outputs_release_frees_and_clears_buf(rt):
    ctx = rt.init(_model("digits_cnn"))
    _digits_input(rt, ctx)
    rt.run(ctx)
    outputs = [abi.rknn_output(want_float=1, is_prealloc=0, index=0)]
    rt.outputs_get(ctx, outputs)
    first = outputs[0].buf
    assert first and outputs[0].size == 40
    values = buffers.output_view(outputs[0], np.float32).copy()
    rt.outputs_release(ctx, outputs)
    assert outputs[0].buf is None
    rt.outputs_get(ctx, outputs)
    assert (buffers.output_view(outputs[0], np.float32) == values).all()
    rt.outputs_release(ctx, outputs)


def test_runtime_keeps_a_malloc_copy_of_the_model_unless_zero_copy(rt):
    """A4/A5: init from bytes mallocs a copy; MODEL_BUFFER_ZERO_COPY keeps none
    and allocates no weight buffer (the NPU reads the weights in place)."""
    data = Path(_model("mobilenet_v2")).read_bytes()
    ctx = rt.init(data)
    context = rt._contexts[ctx]
    assert context.model_bytes.heap and context.model_bytes.size == len(data)
    assert ctypes.string_at(context.model_bytes.address, 64) == data[:64]

    holder = rt.create_mem2(0, len(data), abi.RKNN_MEM_FLAG_ALLOC_NO_CONTEXT)
    buffers.mem_view(holder)[:] = np.frombuffer(data, np.uint8)
    extend = abi.rknn_init_extend(model_buffer_fd=holder.contents.fd, real_model_size=len(data))
    zero = rt.init(holder.contents.virt_addr, abi.RKNN_FLAG_MODEL_BUFFER_ZERO_COPY, extend, size=len(data))
    assert not rt._contexts[zero].model_bytes.heap
    report = models.load_report("mobilenet_v2")
    assert _dma_total(rt, ctx) - _dma_total(rt, zero) == report.total_weight_size
    rt.inputs_set(zero, [buffers.input_from_array(0, np.zeros((1, 224, 224, 3), np.uint8),
                                                  abi.RKNN_TENSOR_NHWC)])
    rt.run(zero)
    rt.destroy_mem(0, holder)  # the weights went with it
    with pytest.raises(errors.RknnParamInvalidError, match="weight memory"):
        rt.run(zero)


def test_mem_alloc_outside_needs_weight_and_internal_mems(rt):
    ctx = rt.init(_model("digits_cnn"), abi.RKNN_FLAG_MEM_ALLOC_OUTSIDE)
    size = rt.query(ctx, abi.RKNN_QUERY_MEM_SIZE)
    assert size.total_dma_allocated_size == 0  # weights, internal and io all left to us
    with pytest.raises(errors.RknnParamInvalidError, match="set_weight_mem"):
        rt.run(ctx)
    weight = rt.create_mem(ctx, size.total_weight_size)
    internal = rt.create_mem(ctx, size.total_internal_size)
    rt.set_weight_mem(ctx, weight)
    data = Path(_model("digits_cnn")).read_bytes()
    assert buffers.mem_view(weight)[:64].tobytes() == data[:64]  # the runtime wrote the weights in
    with pytest.raises(errors.RknnParamInvalidError, match="set_internal_mem"):
        rt.run(ctx)
    rt.set_internal_mem(ctx, internal)
    # io is ours too (A51): no input buffer to write into, no run until every tensor is bound
    with pytest.raises(errors.RknnParamInvalidError, match="set_io_mem"):
        _digits_input(rt, ctx)
    with pytest.raises(errors.RknnParamInvalidError, match="bind input 0"):
        rt.run(ctx)
    attrs = {}
    for cmd in (abi.RKNN_QUERY_NATIVE_INPUT_ATTR, abi.RKNN_QUERY_NATIVE_OUTPUT_ATTR):
        attr = attrs[cmd] = rt.query(ctx, cmd, abi.rknn_tensor_attr(index=0))
        rt.set_io_mem(ctx, rt.create_mem(ctx, attr.size_with_stride), attr)
    assert rt.query(ctx, abi.RKNN_QUERY_MEM_SIZE).total_dma_allocated_size == (
        size.total_weight_size + size.total_internal_size
        + sum(a.size_with_stride for a in attrs.values()))  # our four mems, nothing of the runtime's
    _digits_input(rt, ctx)  # into the bound native mem
    rt.run(ctx)


def test_two_models_share_one_internal_buffer(rt):
    """The documented pattern: one create_mem of the larger internal size,
    create_mem_from_fd of it for each context."""
    a = rt.init(_model("mobilenet_v2"), abi.RKNN_FLAG_INTERNAL_ALLOC_OUTSIDE)
    b = rt.init(_model("digits_cnn"), abi.RKNN_FLAG_INTERNAL_ALLOC_OUTSIDE)
    size_a = rt.query(a, abi.RKNN_QUERY_MEM_SIZE).total_internal_size
    size_b = rt.query(b, abi.RKNN_QUERY_MEM_SIZE).total_internal_size
    largest = rt.create_mem(a, max(size_a, size_b))
    mem_a = rt.create_mem_from_fd(a, largest.contents.fd, largest.contents.virt_addr, size_a, 0)
    mem_b = rt.create_mem_from_fd(b, largest.contents.fd, largest.contents.virt_addr, size_b, 0)
    rt.set_internal_mem(a, mem_a)
    rt.set_internal_mem(b, mem_b)
    _digits_input(rt, b)
    rt.run(b)
    rt.inputs_set(a, [buffers.input_from_array(0, np.zeros((1, 224, 224, 3), np.uint8), abi.RKNN_TENSOR_NHWC)])
    rt.run(a)
    buffers.mem_view(mem_a)[:8] = 9
    assert (buffers.mem_view(mem_b)[:8] == 9).all()  # really the same pages


def test_shared_weights_are_counted_once_and_outlive_their_first_context(rt):
    first = rt.init(_model("digits_cnn"))
    weights = models.load_report("digits_cnn").total_weight_size
    shared = rt.init(_model("digits_cnn"), abi.RKNN_FLAG_SHARE_WEIGHT_MEM, abi.rknn_init_extend(ctx=first))
    assert _dma_total(rt, first) - _dma_total(rt, shared) == weights
    duplicate = rt.dup_context(first)
    assert _dma_total(rt, first) - _dma_total(rt, duplicate) == weights
    rt.destroy(first)
    for ctx in (shared, duplicate):
        _digits_input(rt, ctx)
        rt.run(ctx)


def test_model_info_only_context_allocates_nothing(rt):
    ctx = rt.init(_model("mobilenet_v2"), abi.RKNN_FLAG_COLLECT_MODEL_INFO_ONLY)
    size = rt.query(ctx, abi.RKNN_QUERY_MEM_SIZE)
    assert size.total_weight_size == models.load_report("mobilenet_v2").total_weight_size
    assert size.total_dma_allocated_size == 0
    assert rt.query(ctx, abi.RKNN_QUERY_IN_OUT_NUM).n_output == 1
    rt.destroy(ctx)


def test_destroy_frees_unreleased_outputs_and_the_contexts_mems(rt):
    ctx = rt.init(_model("digits_cnn"))
    _digits_input(rt, ctx)
    rt.run(ctx)
    leaked = [abi.rknn_output(want_float=1, index=0) for _ in range(3)]
    for output in leaked:
        rt.outputs_get(ctx, [output])
    assert len(rt._contexts[ctx].heap_outputs) == 3
    mem = rt.create_mem(ctx, 1 << 20)
    fd = mem.contents.fd
    rt.destroy(ctx)
    with pytest.raises(OSError):
        os.fstat(fd)  # closed with its context (A7)
    with pytest.raises(errors.RknnParamInvalidError):
        rt.destroy_mem(0, mem)
