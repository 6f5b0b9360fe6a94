"""The simulator's lifecycle assumptions (A37, A40, A41), measured in this process."""
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
    assert {"A37", "A38", "A39", "A40", "A41"} <= keys


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
