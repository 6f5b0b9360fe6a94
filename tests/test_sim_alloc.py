"""Simulator: allocation outside the runtime (chapter 5): MEM_ALLOC_OUTSIDE and
INTERNAL_ALLOC_OUTSIDE, rknn_create_mem_from_phys, the alloc flags a mem keeps,
and the Runtime interface both backends implement."""
from __future__ import annotations

import inspect

import numpy as np
import pytest

from rknnlab import models
from rknnlab.rknn import abi, buffers, errors
from rknnlab.rknn.native import NativeRuntime
from rknnlab.rknn.runtime import Runtime
from rknnlab.sim import ASSUMPTIONS, SimRuntime


@pytest.fixture
def rt():
    runtime = SimRuntime("rk3588")
    yield runtime
    runtime.close()


def _path(name: str) -> str:
    return str(models.model_path(name, "rk3588"))


def _attr(rt: SimRuntime, ctx: int, cmd: int, index: int = 0) -> abi.rknn_tensor_attr:
    return rt.query(ctx, cmd, abi.rknn_tensor_attr(index=index))


def _bind_native_io(rt: SimRuntime, ctx: int):
    """Bind one create_mem per input and output in the native layout; returns (in, out) mems."""
    io = rt.query(ctx, abi.RKNN_QUERY_IN_OUT_NUM)
    mems = ([], [])
    for outputs, cmd, n in ((0, abi.RKNN_QUERY_NATIVE_INPUT_ATTR, io.n_input),
                            (1, abi.RKNN_QUERY_NATIVE_OUTPUT_ATTR, io.n_output)):
        for i in range(n):
            attr = _attr(rt, ctx, cmd, i)
            mem = rt.create_mem(ctx, attr.size_with_stride)
            rt.set_io_mem(ctx, mem, attr)
            mems[outputs].append(mem)
    return mems


def _digits_image() -> np.ndarray:
    return (np.arange(64, dtype=np.uint8) * 3).reshape(1, 8, 8, 1)


def _reference_output(rt: SimRuntime, image: np.ndarray) -> np.ndarray:
    ctx = rt.init(_path("digits_cnn"))
    rt.inputs_set(ctx, [buffers.input_from_array(0, image, abi.RKNN_TENSOR_NHWC)])
    rt.run(ctx)
    out = abi.rknn_output(index=0, want_float=0)
    rt.outputs_get(ctx, [out])
    values = buffers.output_view(out, np.int8).copy()
    rt.outputs_release(ctx, [out])
    rt.destroy(ctx)
    return values


# ----------------------------------------------------------------- Runtime interface
def test_both_backends_implement_set_input_shapes_and_create_mem_from_phys():
    for name in ("set_input_shapes", "create_mem_from_phys"):
        assert name in Runtime.__abstractmethods__
        for backend in (SimRuntime, NativeRuntime):
            assert name not in backend.__abstractmethods__
    sim = inspect.signature(SimRuntime.create_mem_from_phys).parameters
    native = inspect.signature(NativeRuntime.create_mem_from_phys).parameters
    assert list(sim) == list(native) == ["self", "ctx", "phys", "virt", "size"]


# ----------------------------------------------------------------- MEM_ALLOC_OUTSIDE (item 1)
def test_mem_alloc_outside_refuses_each_missing_mem_by_name(rt):
    ctx = rt.init(_path("digits_cnn"), abi.RKNN_FLAG_MEM_ALLOC_OUTSIDE)
    size = rt.query(ctx, abi.RKNN_QUERY_MEM_SIZE)
    assert size.total_dma_allocated_size == 0
    with pytest.raises(errors.RknnParamInvalidError, match="rknn_set_weight_mem"):
        rt.run(ctx)
    rt.set_weight_mem(ctx, rt.create_mem(ctx, size.total_weight_size))
    with pytest.raises(errors.RknnParamInvalidError, match="rknn_set_internal_mem"):
        rt.run(ctx)
    rt.set_internal_mem(ctx, rt.create_mem(ctx, size.total_internal_size))
    with pytest.raises(errors.RknnParamInvalidError) as caught:
        rt.run(ctx)
    assert "rknn_set_io_mem" in str(caught.value)
    assert "input 0 ('input')" in str(caught.value) and "output 0" in str(caught.value)
    # binding only the input still leaves the output missing
    attr = _attr(rt, ctx, abi.RKNN_QUERY_NATIVE_INPUT_ATTR)
    rt.set_io_mem(ctx, rt.create_mem(ctx, attr.size_with_stride), attr)
    with pytest.raises(errors.RknnParamInvalidError) as caught:
        rt.run(ctx)
    assert "output 0" in str(caught.value) and "input 0" not in str(caught.value)


def test_mem_alloc_outside_runs_right_with_everything_bound(rt):
    """The reuse demo's steps: weights, internal and every io tensor in caller mems;
    the outputs equal a context whose runtime allocated everything."""
    image = _digits_image()
    expected = _reference_output(rt, image)
    ctx = rt.init(_path("digits_cnn"), abi.RKNN_FLAG_MEM_ALLOC_OUTSIDE)
    size = rt.query(ctx, abi.RKNN_QUERY_MEM_SIZE)
    rt.set_weight_mem(ctx, rt.create_mem(ctx, size.total_weight_size))
    rt.set_internal_mem(ctx, rt.create_mem(ctx, size.total_internal_size))
    with pytest.raises(errors.RknnParamInvalidError, match="set_io_mem"):
        rt.inputs_set(ctx, [buffers.input_from_array(0, image, abi.RKNN_TENSOR_NHWC)])
    (_,), (out_mem,) = _bind_native_io(rt, ctx)
    rt.inputs_set(ctx, [buffers.input_from_array(0, image, abi.RKNN_TENSOR_NHWC)])
    rt.run(ctx)
    out = abi.rknn_output(index=0, want_float=0)
    rt.outputs_get(ctx, [out])
    got = buffers.output_view(out, np.int8).copy()
    rt.outputs_release(ctx, [out])
    np.testing.assert_array_equal(got, expected)
    assert buffers.mem_view(out_mem).any()  # the NPU wrote the bound output mem


def test_internal_alloc_outside_needs_only_the_internal_mem(rt):
    ctx = rt.init(_path("digits_cnn"), abi.RKNN_FLAG_INTERNAL_ALLOC_OUTSIDE)
    rt.inputs_set(ctx, [buffers.input_from_array(0, _digits_image(), abi.RKNN_TENSOR_NHWC)])
    with pytest.raises(errors.RknnParamInvalidError, match="rknn_set_internal_mem"):
        rt.run(ctx)
    with pytest.raises(errors.RknnParamInvalidError, match="MEM_ALLOC_OUTSIDE"):
        rt.set_weight_mem(ctx, rt.create_mem(ctx, 1 << 16))
    size = rt.query(ctx, abi.RKNN_QUERY_MEM_SIZE)
    rt.set_internal_mem(ctx, rt.create_mem(ctx, size.total_internal_size))
    rt.run(ctx)  # weights and io stay the runtime's


# ----------------------------------------------------------------- weights read from the weight mem (A58)
def _outside_context(rt: SimRuntime, name: str = "digits_cnn"):
    """A MEM_ALLOC_OUTSIDE context with its io bound (native), its input set; (ctx, MEM_SIZE)."""
    ctx = rt.init(_path(name), abi.RKNN_FLAG_MEM_ALLOC_OUTSIDE)
    _bind_native_io(rt, ctx)
    return ctx, rt.query(ctx, abi.RKNN_QUERY_MEM_SIZE)


def _outputs_of_runs(rt: SimRuntime, ctx: int, image: np.ndarray, runs: int = 3):
    rt.inputs_set(ctx, [buffers.input_from_array(0, image, abi.RKNN_TENSOR_NHWC)])
    got = []
    for _ in range(runs):
        rt.run(ctx)
        got.append(_output(rt, ctx))
    return got


def test_one_mem_as_weights_and_internal_gives_wrong_outputs(rt):
    """Every run writes its intermediate tensors over the weights the NPU reads."""
    image = _digits_image()
    expected = _reference_output(rt, image)
    ctx, size = _outside_context(rt)
    both = rt.create_mem(ctx, max(size.total_weight_size, size.total_internal_size))
    rt.set_weight_mem(ctx, both)
    rt.set_internal_mem(ctx, both)
    got = _outputs_of_runs(rt, ctx, image)
    for run, values in enumerate(got[1:], 2):
        assert not np.array_equal(values, expected), f"run {run} read overwritten weights and was right"
    assert not np.array_equal(got[0], expected)  # the first run writes over them too (A28, A58)
    assert np.array_equal(got[1], got[2])  # deterministic for the same damage


def test_overlapping_views_of_one_buffer_give_wrong_outputs(rt):
    image = _digits_image()
    expected = _reference_output(rt, image)
    ctx, size = _outside_context(rt)
    weights, internal = size.total_weight_size, size.total_internal_size
    assert weights > 4096
    big = rt.create_mem(ctx, weights + internal)
    fd, virt = big.contents.fd, big.contents.virt_addr
    rt.set_weight_mem(ctx, rt.create_mem_from_fd(ctx, fd, virt, weights, 0))
    rt.set_internal_mem(ctx, rt.create_mem_from_fd(ctx, fd, virt, 4096 + internal, 4096))  # inside the weights
    for values in _outputs_of_runs(rt, ctx, image):
        assert not np.array_equal(values, expected)


def test_non_overlapping_views_of_one_buffer_give_right_outputs(rt):
    image = _digits_image()
    expected = _reference_output(rt, image)
    ctx, size = _outside_context(rt)
    weights, internal = size.total_weight_size, size.total_internal_size
    start = -(-weights // 4096) * 4096  # the internal part starts on the page after the weights
    big = rt.create_mem(ctx, start + internal)
    fd, virt = big.contents.fd, big.contents.virt_addr
    rt.set_weight_mem(ctx, rt.create_mem_from_fd(ctx, fd, virt, weights, 0))
    rt.set_internal_mem(ctx, rt.create_mem_from_fd(ctx, fd, virt, start + internal, start))
    for values in _outputs_of_runs(rt, ctx, image):
        np.testing.assert_array_equal(values, expected)


def test_weights_overwritten_between_runs_stay_wrong_until_set_again(rt):
    image = _digits_image()
    expected = _reference_output(rt, image)
    ctx, size = _outside_context(rt)
    weight_mem = rt.create_mem(ctx, size.total_weight_size)
    rt.set_weight_mem(ctx, weight_mem)
    rt.set_internal_mem(ctx, rt.create_mem(ctx, size.total_internal_size))
    np.testing.assert_array_equal(_outputs_of_runs(rt, ctx, image, runs=1)[0], expected)
    view = buffers.mem_view(weight_mem)
    view[1000:9000] ^= 0x5A  # the CPU writes into the weights (8,000 bytes)
    for values in _outputs_of_runs(rt, ctx, image, runs=2):
        assert not np.array_equal(values, expected)
    rt.set_weight_mem(ctx, weight_mem)  # the runtime loads them again
    np.testing.assert_array_equal(_outputs_of_runs(rt, ctx, image, runs=1)[0], expected)


@pytest.mark.parametrize("cmd", [abi.RKNN_QUERY_NATIVE_INPUT_ATTR, abi.RKNN_QUERY_NATIVE_OUTPUT_ATTR])
def test_an_internal_mem_that_is_also_an_io_mem_gives_wrong_outputs(rt, cmd):
    """The run's intermediate tensors land on the bound input (or output) bytes (A28)."""
    image = _digits_image()
    expected = _reference_output(rt, image)
    ctx = rt.init(_path("digits_cnn"), abi.RKNN_FLAG_INTERNAL_ALLOC_OUTSIDE)
    attr = _attr(rt, ctx, cmd)
    both = rt.create_mem(ctx, max(rt.query(ctx, abi.RKNN_QUERY_MEM_SIZE).total_internal_size,
                                  attr.size_with_stride))
    rt.set_io_mem(ctx, both, attr)
    rt.set_internal_mem(ctx, both)
    for values in _outputs_of_runs(rt, ctx, image):
        assert not np.array_equal(values, expected)


def test_the_weight_sample_catches_any_overwritten_run_it_promises(rt):
    """Any overwritten run of more than nbytes / SAMPLES bytes changes the sample, however
    large the weights (40 MB here), and checking costs well under a millisecond."""
    import time
    from rknnlab.sim.weightprint import SAMPLES, WeightPrint
    weights = np.random.default_rng(1).integers(0, 256, size=40 << 20, dtype=np.uint8)
    written = WeightPrint(weights)
    span = -(-weights.size // (SAMPLES - 1)) + 1
    for start in (0, 12_345_677, weights.size - span):
        damaged = weights.copy()
        damaged[start:start + span] ^= 0xFF
        assert written.changed(damaged), start
    assert not written.changed(weights)
    started = time.perf_counter()
    for _ in range(100):
        written.changed(weights)
    assert (time.perf_counter() - started) / 100 < 1e-3


# ----------------------------------------------------------------- another context's mem (A59)
def test_another_live_contexts_mem_is_refused_by_every_setter(rt):
    a = rt.init(_path("digits_cnn"), abi.RKNN_FLAG_MEM_ALLOC_OUTSIDE)
    b = rt.init(_path("digits_cnn"), abi.RKNN_FLAG_MEM_ALLOC_OUTSIDE)
    size = rt.query(b, abi.RKNN_QUERY_MEM_SIZE)
    big = rt.create_mem(a, max(size.total_weight_size, size.total_internal_size, 4096))
    native_in = _attr(rt, b, abi.RKNN_QUERY_NATIVE_INPUT_ATTR)
    calls = {"rknn_set_internal_mem": lambda mem: rt.set_internal_mem(b, mem),
             "rknn_set_weight_mem": lambda mem: rt.set_weight_mem(b, mem),
             "rknn_set_io_mem": lambda mem: rt.set_io_mem(b, mem, native_in)}
    for name, call in calls.items():
        with pytest.raises(errors.RknnParamInvalidError, match=f"0x{a:x}.*rknn_create_mem_from_fd") as refused:
            call(big)
        assert name in str(refused.value) and "A59" in str(refused.value)
        assert "the simulator's rule" in refused.value.detail  # not a documented refusal
    with pytest.raises(errors.RknnParamInvalidError, match="no weight memory"):
        rt.run(b)  # nothing was kept
    # the same pages through B's own view are fine (the documented way)
    for call in calls.values():
        call(rt.create_mem_from_fd(b, big.contents.fd, big.contents.virt_addr, big.contents.size, 0))


def test_a_mem_of_no_context_is_accepted_by_any_context(rt):
    image = _digits_image()
    expected = _reference_output(rt, image)
    ctx = rt.init(_path("digits_cnn"), abi.RKNN_FLAG_INTERNAL_ALLOC_OUTSIDE)
    other = rt.init(_path("digits_cnn"), abi.RKNN_FLAG_INTERNAL_ALLOC_OUTSIDE)
    size = rt.query(ctx, abi.RKNN_QUERY_MEM_SIZE).total_internal_size
    shared = rt.create_mem2(0, size, abi.RKNN_MEM_FLAG_ALLOC_NO_CONTEXT)
    for handle in (ctx, other):
        rt.set_internal_mem(handle, shared)
        assert _outputs_of_runs(rt, handle, image, runs=1)[0].tolist() == expected.tolist()
    rt.destroy_mem(0, shared)


# ----------------------------------------------------------------- create_mem_from_phys (item 2)
def test_create_mem_from_phys_views_the_same_pages(rt):
    ctx = rt.init(_path("digits_cnn"))
    big = rt.create_mem(ctx, 3 * 4096)
    base = big.contents.phys_addr
    view = rt.create_mem_from_phys(ctx, base + 4096 + 100, 0, 200)
    mem = view.contents
    assert mem.phys_addr == base + 4096 + 100
    assert mem.size == 200 and mem.offset == 0
    assert mem.fd == -1 and mem.flags == abi.RKNN_TENSOR_MEMORY_FLAGS_FROM_PHYS
    assert mem.virt_addr != big.contents.virt_addr + 4096 + 100  # a new mapping (A50)
    whole = buffers.mem_view(big)
    part = buffers.mem_view(view)
    part[:] = np.arange(200, dtype=np.uint8)
    np.testing.assert_array_equal(whole[4096 + 100:4096 + 300], np.arange(200, dtype=np.uint8))
    whole[4096 + 100] = 77
    assert part[0] == 77
    # the view does not count in the DMA total (pages someone else allocated: A9)
    total = rt.query(ctx, abi.RKNN_QUERY_MEM_SIZE).total_dma_allocated_size
    rt.destroy_mem(ctx, view)
    assert rt.query(ctx, abi.RKNN_QUERY_MEM_SIZE).total_dma_allocated_size == total
    assert whole[4096 + 100] == 77  # destroying the view leaves the pages to their owner


@pytest.mark.parametrize("where", ["before", "past_end", "straddles_end", "nowhere"])
def test_create_mem_from_phys_refuses_addresses_no_mem_holds(rt, where):
    ctx = rt.init(_path("digits_cnn"))
    mem = rt.create_mem(ctx, 8192)
    base = mem.contents.phys_addr
    phys, size = {"before": (base - 16, 32), "past_end": (base + 8192, 16),
                  "straddles_end": (base + 8000, 400), "nowhere": (0x1234, 64)}[where]
    with pytest.raises(errors.RknnParamInvalidError, match="A30"):
        rt.create_mem_from_phys(ctx, phys, 0, size)


def test_create_mem_from_phys_refuses_size_zero_and_a_destroyed_mem(rt):
    ctx = rt.init(_path("digits_cnn"))
    mem = rt.create_mem(ctx, 4096)
    base = mem.contents.phys_addr
    with pytest.raises(errors.RknnParamInvalidError, match="size 0"):
        rt.create_mem_from_phys(ctx, base, 0, 0)
    rt.destroy_mem(ctx, mem)
    with pytest.raises(errors.RknnParamInvalidError, match="no NPU memory"):
        rt.create_mem_from_phys(ctx, base, 0, 64)


def test_a_from_phys_mem_serves_as_internal_memory(rt):
    """A slice of a bigger buffer, addressed by phys, bound as a context's internal memory."""
    ctx = rt.init(_path("digits_cnn"), abi.RKNN_FLAG_INTERNAL_ALLOC_OUTSIDE)
    need = rt.query(ctx, abi.RKNN_QUERY_MEM_SIZE).total_internal_size
    pool = rt.create_mem(ctx, need + 4096)
    internal = rt.create_mem_from_phys(ctx, pool.contents.phys_addr + 4096, 0, need)
    rt.set_internal_mem(ctx, internal)
    rt.inputs_set(ctx, [buffers.input_from_array(0, _digits_image(), abi.RKNN_TENSOR_NHWC)])
    rt.run(ctx)


# ----------------------------------------------------------------- alloc flags (item 6)
def test_mems_remember_their_alloc_flags(rt):
    ctx = rt.init(_path("digits_cnn"))
    records = {}
    for label, make in (("create_mem", lambda: rt.create_mem(ctx, 4096)),
                        ("default", lambda: rt.create_mem2(ctx, 4096, abi.RKNN_FLAG_MEMORY_FLAGS_DEFAULT)),
                        ("cacheable", lambda: rt.create_mem2(ctx, 4096, abi.RKNN_FLAG_MEMORY_CACHEABLE)),
                        ("non_cacheable", lambda: rt.create_mem2(ctx, 4096, abi.RKNN_FLAG_MEMORY_NON_CACHEABLE)),
                        ("no_context", lambda: rt.create_mem2(0, 4096, abi.RKNN_FLAG_MEMORY_NON_CACHEABLE
                                                              | abi.RKNN_MEM_FLAG_ALLOC_NO_CONTEXT))):
        records[label] = rt._mem(make(), "test")
    assert {k: r.cacheable for k, r in records.items()} == {
        "create_mem": True, "default": True, "cacheable": True, "non_cacheable": False, "no_context": False}
    assert records["non_cacheable"].alloc_flags == abi.RKNN_FLAG_MEMORY_NON_CACHEABLE
    assert records["no_context"].alloc_flags == abi.RKNN_FLAG_MEMORY_NON_CACHEABLE
    # an import of our own pages keeps their cacheability; a foreign fd is unknown
    uncached = records["non_cacheable"]
    imported = rt._mem(rt.create_mem_from_fd(ctx, uncached.buffer.fd, 0, 4096, 0), "test")
    assert imported.cacheable is False
    by_phys = rt._mem(rt.create_mem_from_phys(ctx, uncached.phys_addr, 0, 64), "test")
    assert by_phys.cacheable is False
    import os
    fd = os.memfd_create("foreign")
    try:
        os.ftruncate(fd, 4096)
        foreign = rt._mem(rt.create_mem_from_fd(ctx, fd, 0, 4096, 0), "test")
        assert foreign.cacheable is None
    finally:
        os.close(fd)


def test_non_cacheable_memory_stays_coherent(rt):
    """A11: the flag is remembered, not modeled as stale data: a non-cacheable bound
    output holds the same bytes as a cacheable one."""
    image = _digits_image()
    results = []
    for flags in (abi.RKNN_FLAG_MEMORY_CACHEABLE, abi.RKNN_FLAG_MEMORY_NON_CACHEABLE):
        ctx = rt.init(_path("digits_cnn"))
        attr = _attr(rt, ctx, abi.RKNN_QUERY_NATIVE_OUTPUT_ATTR)
        mem = rt.create_mem2(ctx, attr.size_with_stride, flags)
        rt.set_io_mem(ctx, mem, attr)
        rt.inputs_set(ctx, [buffers.input_from_array(0, image, abi.RKNN_TENSOR_NHWC)])
        rt.run(ctx)
        results.append(buffers.mem_view(mem).copy())
    np.testing.assert_array_equal(results[0], results[1])
    assert results[0].any()


# ----------------------------------------------------------------- static models (A52)
def test_static_model_refuses_dynamic_shape_calls(rt):
    ctx = rt.init(_path("digits_cnn"))
    with pytest.raises(errors.RknnModelInvalidError, match="static shape model"):  # public 2.3.0 logs
        rt.query(ctx, abi.RKNN_QUERY_INPUT_DYNAMIC_RANGE, abi.rknn_input_range(index=0))
    attr = _attr(rt, ctx, abi.RKNN_QUERY_INPUT_ATTR)
    with pytest.raises(errors.RknnParamInvalidError, match="one input shape"):
        rt.set_input_shapes(ctx, [attr])
    for current, plain in ((abi.RKNN_QUERY_CURRENT_INPUT_ATTR, abi.RKNN_QUERY_INPUT_ATTR),
                           (abi.RKNN_QUERY_CURRENT_NATIVE_OUTPUT_ATTR, abi.RKNN_QUERY_NATIVE_OUTPUT_ATTR)):
        a, b = _attr(rt, ctx, current), _attr(rt, ctx, plain)
        assert bytes(a) == bytes(b)


def test_new_assumptions_are_listed_once_with_a_board_check():
    ids = [key for key, _, _ in ASSUMPTIONS]
    assert len(ids) == len(set(ids))
    assert ids == [f"A{i}" for i in range(1, len(ids) + 1)]
    by_id = {key: (text, check) for key, text, check in ASSUMPTIONS}
    for key in ("A50", "A51", "A52", "A57", "A58"):
        text, check = by_id[key]
        assert text and check


# ----------------------------------------------------------------- shared internal memory (item 3, A28)
def _mobilenet_image() -> np.ndarray:
    return np.random.default_rng(5).integers(0, 256, size=(1, 224, 224, 3), dtype=np.uint8)


_IMAGES = {"mobilenet_v2": _mobilenet_image, "digits_cnn": _digits_image}


def _output(rt: SimRuntime, ctx: int) -> np.ndarray:
    out = abi.rknn_output(index=0, want_float=0)
    rt.outputs_get(ctx, [out])
    values = buffers.output_view(out, np.int8).copy()
    rt.outputs_release(ctx, [out])
    return values


def _set_input(rt: SimRuntime, ctx: int, name: str) -> None:
    rt.inputs_set(ctx, [buffers.input_from_array(0, _IMAGES[name](), abi.RKNN_TENSOR_NHWC)])


@pytest.fixture
def shared_pair(rt):
    """mobilenet_v2 and digits_cnn (both with ONNX twins: real outputs) sharing one
    internal buffer, the documented way; plus each model's outputs from a context
    with its own internal memory."""
    names = ("mobilenet_v2", "digits_cnn")
    expected = {}
    for name in names:
        ctx = rt.init(_path(name))
        _set_input(rt, ctx, name)
        rt.run(ctx)
        expected[name] = _output(rt, ctx)
        rt.destroy(ctx)
    contexts = {name: rt.init(_path(name), abi.RKNN_FLAG_INTERNAL_ALLOC_OUTSIDE) for name in names}
    sizes = {name: rt.query(ctx, abi.RKNN_QUERY_MEM_SIZE).total_internal_size for name, ctx in contexts.items()}
    big = rt.create_mem(contexts["mobilenet_v2"], max(sizes.values()))
    for name, ctx in contexts.items():
        view = rt.create_mem_from_fd(ctx, big.contents.fd, big.contents.virt_addr, sizes[name], 0)
        rt.set_internal_mem(ctx, view)
        _set_input(rt, ctx, name)
    return contexts, expected, buffers.mem_view(big)


def test_models_sharing_internal_memory_one_after_another_are_right(rt, shared_pair):
    contexts, expected, _ = shared_pair
    for _ in range(3):
        for name, ctx in contexts.items():
            rt.run(ctx)
            np.testing.assert_array_equal(_output(rt, ctx), expected[name])


def _overlapping_runs(rt: SimRuntime, first: int, second: int, shared: np.ndarray) -> None:
    """Start a run of ``first`` in a thread, then one of ``second`` as soon as the first
    has written its state into the shared buffer (mobilenet_v2: 2.2 ms modeled)."""
    import threading
    import time
    shared[:] = 0  # a run writes non-zero bytes over its whole plan at its start
    thread = threading.Thread(target=rt.run, args=(first,))
    thread.start()
    deadline = time.perf_counter() + 5
    while not shared[-1] and time.perf_counter() < deadline:
        time.sleep(0)
    rt.run(second)
    thread.join()


def test_models_sharing_internal_memory_at_the_same_time_corrupt_outputs(rt, shared_pair):
    contexts, expected, shared = shared_pair
    mobilenet, digits = contexts["mobilenet_v2"], contexts["digits_cnn"]
    rt.set_core_mask(mobilenet, abi.RKNN_NPU_CORE_0)
    rt.set_core_mask(digits, abi.RKNN_NPU_CORE_1)
    for _ in range(20):  # a loaded host may stall a thread past the 2.2 ms window: try again
        _overlapping_runs(rt, mobilenet, digits, shared)
        wrong = _output(rt, mobilenet)
        if not np.array_equal(wrong, expected["mobilenet_v2"]):  # digits wrote over its input
            break
    assert not np.array_equal(wrong, expected["mobilenet_v2"])
    # the same two runs one after another on the same buffer are right again
    rt.run(mobilenet)
    np.testing.assert_array_equal(_output(rt, mobilenet), expected["mobilenet_v2"])


def test_auto_puts_overlapping_runs_on_idle_cores_so_they_corrupt_too(rt, shared_pair):
    contexts, expected, shared = shared_pair
    mobilenet, digits = contexts["mobilenet_v2"], contexts["digits_cnn"]
    for ctx in (mobilenet, digits):
        rt.set_core_mask(ctx, abi.RKNN_NPU_CORE_AUTO)
    # as above: 20 tries (5 all missed the 2.2 ms window once, in CI's Python 3.9 run on
    # 3 busy workers, 2026-12-02); runs queued on one core would never corrupt
    for _ in range(20):
        _overlapping_runs(rt, mobilenet, digits, shared)
        if not np.array_equal(_output(rt, mobilenet), expected["mobilenet_v2"]):
            break
    assert not np.array_equal(_output(rt, mobilenet), expected["mobilenet_v2"])


def test_the_same_core_queues_runs_so_sharing_is_safe(rt, shared_pair):
    contexts, expected, shared = shared_pair
    for ctx in contexts.values():
        rt.set_core_mask(ctx, abi.RKNN_NPU_CORE_0)
    _overlapping_runs(rt, contexts["mobilenet_v2"], contexts["digits_cnn"], shared)
    for name, ctx in contexts.items():
        np.testing.assert_array_equal(_output(rt, ctx), expected[name])


def test_contexts_with_their_own_internal_memory_run_at_once_correctly(rt):
    expected = {}
    contexts = {}
    for name in ("mobilenet_v2", "digits_cnn"):
        ctx = contexts[name] = rt.init(_path(name))
        _set_input(rt, ctx, name)
        rt.run(ctx)
        expected[name] = _output(rt, ctx)
    rt.set_core_mask(contexts["mobilenet_v2"], abi.RKNN_NPU_CORE_0)
    rt.set_core_mask(contexts["digits_cnn"], abi.RKNN_NPU_CORE_1)
    import threading
    thread = threading.Thread(target=rt.run, args=(contexts["mobilenet_v2"],))
    thread.start()
    rt.run(contexts["digits_cnn"])
    thread.join()
    for name, ctx in contexts.items():
        np.testing.assert_array_equal(_output(rt, ctx), expected[name])


def test_phys_addrs_stay_in_one_4_gib_domain_and_freed_ranges_come_back(rt):
    """A30: made-up IOVAs are the first free pages of one 4 GiB domain, so a long session
    (the whole test suite, a notebook kernel that runs for hours) never leaves 32 bits."""
    ctx = rt.init(str(models.model_path("digits_cnn", "rk3588")))
    first = rt.create_mem(ctx, 64 << 20)
    base = first.contents.phys_addr
    rt.destroy_mem(ctx, first)
    for _ in range(100):                      # 6.25 GiB of address space, one mem at a time
        mem = rt.create_mem(ctx, 64 << 20)
        assert mem.contents.phys_addr == base  # the freed range is used again
        rt.destroy_mem(ctx, mem)
    small = rt.create_mem(ctx, 100)
    held = rt.create_mem(ctx, 5000)            # two pages
    assert held.contents.phys_addr == small.contents.phys_addr + 4096
    assert held.contents.phys_addr + 8192 <= 1 << 32
    rt.destroy_mem(ctx, small)
    again = rt.create_mem(ctx, 4096)           # fits in the page the small mem gave back
    assert again.contents.phys_addr == held.contents.phys_addr - 4096
    for mem in (held, again):
        rt.destroy_mem(ctx, mem)
    rt.destroy(ctx)

