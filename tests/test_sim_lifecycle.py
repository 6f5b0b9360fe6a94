"""The simulator's lifecycle assumptions (A37, A40-A43), measured in this process, and what
their texts must say (the board checks the runtime review asked for)."""
from __future__ import annotations

import os

import numpy as np
import pytest

pytest.importorskip("onnxruntime", reason="the simulator needs onnxruntime (the sim extra)")

from rknnlab import lifecycle, models
from rknnlab.experiment.variants import query_io
from rknnlab.probe import Heap
from rknnlab.rknn import abi, buffers, errors
from rknnlab.sim import ASSUMPTIONS, SimRuntime

MODEL = str(models.model_path("mobilenet_v2", "rk3588"))


@pytest.fixture
def rt():
    runtime = SimRuntime("rk3588")
    yield runtime
    runtime.close()


def _model_mem(rt):
    size = os.path.getsize(MODEL)
    mem = rt.create_mem2(0, size, abi.RKNN_MEM_FLAG_ALLOC_NO_CONTEXT)
    buffers.mem_view(mem)[:size] = np.fromfile(MODEL, np.uint8)
    extend = abi.rknn_init_extend(real_model_offset=0, real_model_size=size,
                                  model_buffer_fd=mem.contents.fd)
    return mem, extend, size


def test_new_assumptions_are_listed():
    keys = {key for key, _, _ in ASSUMPTIONS}
    assert {"A37", "A38", "A39", "A40", "A41", "A42", "A43"} <= keys


def _text(key):
    return {k: (a, c) for k, a, c in ASSUMPTIONS}[key]


def test_assumption_texts_cite_what_settles_them():
    a4, check4 = _text("A4")
    assert "uordblks + hblkhd" in check4 and "rknnlab.probe.Heap" in check4   # a 4 MB malloc is mmapped
    a37, check37 = _text("A37")
    assert "task" in a37 and "#287" in a37 and "rknn-llm#47" in a37 and "#62" in a37
    assert "3 + inputs + outputs" in check37
    a38, _ = _text("A38")
    assert "#284" in a38 and "not evidence against this assumption" in a38   # 1858 never destroyed
    a39, check39 = _text("A39")
    assert "#533" in a39 and "no runtime version" in a39
    assert "VmSize" in check39 and "/proc/self/maps" in check39
    _, check40 = _text("A40")
    assert check40.startswith("WARNING") and "IOMMU fault" in check40 and "spare board" in check40
    a42, _ = _text("A42")
    assert "p.18" in a42 and "p.20" in a42 and "NULL" in a42
    a43, _ = _text("A43")
    assert "p.16" in a43 and "ordinary buffer" in a43


def test_a37_a_descriptor_per_dma_buffer(rt):
    before = lifecycle.open_fds()
    ctx = rt.init(MODEL)
    ins, outs = query_io(rt, ctx)
    assert lifecycle.open_fds() - before == 2 + len(ins) + len(outs)   # weights, internal, io
    mem = rt.create_mem(ctx, 4096)
    assert lifecycle.open_fds() - before == 3 + len(ins) + len(outs)
    rt.destroy_mem(ctx, mem)
    rt.destroy(ctx)
    assert lifecycle.open_fds() == before
    model_mem, extend, size = _model_mem(rt)
    with_mem = lifecycle.open_fds()
    zc = rt.init(model_mem.contents.virt_addr, flag=abi.RKNN_FLAG_MODEL_BUFFER_ZERO_COPY,
                 extend=extend, size=size)
    assert lifecycle.open_fds() - with_mem == 1 + len(ins) + len(outs)  # no weight buffer
    rt.destroy(zc)
    rt.destroy_mem(0, model_mem)
    assert lifecycle.open_fds() == before


def test_a40_destroying_the_zero_copy_model_mem_fails_the_next_run(rt):
    model_mem, extend, size = _model_mem(rt)
    ctx = rt.init(model_mem.contents.virt_addr, flag=abi.RKNN_FLAG_MODEL_BUFFER_ZERO_COPY,
                  extend=extend, size=size)
    rt.run(ctx)
    rt.destroy_mem(0, model_mem)
    with pytest.raises(errors.RknnError) as caught:
        rt.run(ctx)
    assert caught.value.code == abi.RKNN_ERR_PARAM_INVALID
    rt.destroy(ctx)


def test_a41_an_info_only_context_allocates_nothing(rt):
    heap = Heap()
    rt.destroy(rt.init(MODEL, flag=abi.RKNN_FLAG_COLLECT_MODEL_INFO_ONLY))  # first-use costs
    fds, used = lifecycle.open_fds(), heap.sample()["heap_in_use_bytes"]
    contexts = [rt.init(MODEL, flag=abi.RKNN_FLAG_COLLECT_MODEL_INFO_ONLY) for _ in range(50)]
    assert lifecycle.open_fds() == fds
    assert (heap.sample()["heap_in_use_bytes"] - used) / len(contexts) < 1024   # no model copy
    sizes = rt.query(contexts[-1], abi.RKNN_QUERY_MEM_SIZE)
    assert sizes.total_dma_allocated_size == 0
    assert sizes.total_weight_size > 0 and sizes.total_internal_size > 0


def test_a42_zero_copy_without_an_extend_finds_the_buffer_by_its_address(rt):
    model_mem, extend, size = _model_mem(rt)
    with_extend = rt.init(model_mem.contents.virt_addr, flag=abi.RKNN_FLAG_MODEL_BUFFER_ZERO_COPY,
                          extend=extend, size=size)
    without = rt.init(model_mem.contents.virt_addr, flag=abi.RKNN_FLAG_MODEL_BUFFER_ZERO_COPY, size=size)
    totals = [rt.query(c, abi.RKNN_QUERY_MEM_SIZE).total_dma_allocated_size for c in (with_extend, without)]
    assert totals[0] == totals[1]          # the weights read in place both ways (A5)
    rt.run(without)
    for ctx in (without, with_extend):
        rt.destroy(ctx)
    rt.destroy_mem(0, model_mem)


def test_a43_real_model_offset_size_select_part_of_a_path_or_zero_copy_buffer_only(rt):
    data = np.fromfile(MODEL, np.uint8)
    junk = 16
    padded = np.concatenate([np.full(junk, 0x55, np.uint8), data])
    part = abi.rknn_init_extend(real_model_offset=junk, real_model_size=len(data))
    with pytest.raises(errors.RknnError, match="A43") as caught:
        rt.init(padded.tobytes(), extend=part, size=len(padded))
    assert caught.value.code == abi.RKNN_ERR_PARAM_INVALID
    whole = abi.rknn_init_extend(real_model_offset=0, real_model_size=len(data))
    rt.destroy(rt.init(data.tobytes(), extend=whole, size=len(data)))   # the whole buffer: no choice made
    # a zero-copy buffer with the model 16 bytes in: the documented case
    mem = rt.create_mem2(0, len(padded), abi.RKNN_MEM_FLAG_ALLOC_NO_CONTEXT)
    buffers.mem_view(mem)[:len(padded)] = padded
    zc = abi.rknn_init_extend(real_model_offset=junk, real_model_size=len(data),
                              model_buffer_fd=mem.contents.fd, model_buffer_flags=mem.contents.flags)
    ctx = rt.init(mem.contents.virt_addr, flag=abi.RKNN_FLAG_MODEL_BUFFER_ZERO_COPY, extend=zc,
                  size=len(padded))
    rt.run(ctx)
    rt.destroy(ctx)
    rt.destroy_mem(0, mem)
