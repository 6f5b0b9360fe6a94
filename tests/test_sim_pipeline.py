"""Simulator: what chapter 6's video pipeline relies on.

Stale caches under the DISABLE_FLUSH init flags (rknnlab.sim.cache, ASSUMPTIONS A60),
replayed output values for timing runs (rknnlab.sim.values_replayed), and the
pipeline's calls together on ppocr_det: dup_context, core masks per context,
contexts on threads, native input and output mems, rknn_mem_sync."""
from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from rknnlab import models
from rknnlab.rknn import abi, buffers, errors
from rknnlab.sim import ASSUMPTIONS, SimRuntime, modeled_run_ms, values_replayed
from rknnlab.sim.outputs import replaying

OUT_FLAG = abi.RKNN_FLAG_DISABLE_FLUSH_OUTPUT_MEM_CACHE
IN_FLAG = abi.RKNN_FLAG_DISABLE_FLUSH_INPUT_MEM_CACHE


@pytest.fixture
def rt():
    runtime = SimRuntime("rk3588")
    yield runtime
    runtime.close()


def _path(name: str, soc: str = "rk3588") -> str:
    return str(models.model_path(name, soc))


def _attr(rt: SimRuntime, ctx: int, cmd: int, index: int = 0) -> abi.rknn_tensor_attr:
    return rt.query(ctx, cmd, abi.rknn_tensor_attr(index=index))


def _frames(n: int, nbytes: int) -> list:
    """``n`` different native input frames for digits_cnn (quantized bytes)."""
    rng = np.random.default_rng(6)
    return [rng.integers(0, 256, nbytes, dtype=np.uint8) for _ in range(n)]


class _Bound:
    """A digits_cnn context with a native input mem and a native output mem bound."""

    def __init__(self, rt: SimRuntime, flag: int = 0, alloc: int = abi.RKNN_FLAG_MEMORY_CACHEABLE) -> None:
        self.rt = rt
        self.ctx = rt.init(_path("digits_cnn"), flag)
        in_attr = _attr(rt, self.ctx, abi.RKNN_QUERY_NATIVE_INPUT_ATTR)
        out_attr = _attr(rt, self.ctx, abi.RKNN_QUERY_NATIVE_OUTPUT_ATTR)
        self.in_mem = rt.create_mem2(self.ctx, in_attr.size_with_stride, alloc)
        self.out_mem = rt.create_mem2(self.ctx, out_attr.size_with_stride, alloc)
        self.in_attr, self.out_attr = in_attr, out_attr
        rt.set_io_mem(self.ctx, self.in_mem, in_attr)
        rt.set_io_mem(self.ctx, self.out_mem, out_attr)

    def write(self, frame: np.ndarray) -> None:
        buffers.mem_view(self.in_mem)[:frame.size] = frame

    def output(self) -> np.ndarray:
        """What the CPU reads through virt_addr now."""
        return buffers.mem_view(self.out_mem)[:self.out_attr.size_with_stride].copy()

    def sync(self, mem, mode: int) -> None:
        self.rt.mem_sync(self.ctx, mem, mode)


def _truth(rt: SimRuntime, frames) -> list:
    """The output bytes of each frame on a coherent (flag 0) context."""
    plain = _Bound(rt)
    results = []
    for frame in frames:
        plain.write(frame)
        rt.run(plain.ctx)
        results.append(plain.output())
    rt.destroy(plain.ctx)
    assert not np.array_equal(results[0], results[1]), "the frames must give different outputs"
    return results


# ----------------------------------------------------------------- stale caches (A60)
def _loop(rt: SimRuntime, frames, sync: str, mode: int = abi.RKNN_MEMORY_SYNC_FROM_DEVICE,
          flag: int = OUT_FLAG, alloc: int = abi.RKNN_FLAG_MEMORY_CACHEABLE) -> list:
    """What the CPU reads from the output mem after each frame's run, with the
    output's rknn_mem_sync(``mode``) placed ``sync``: "none", "after" or "before" the run."""
    bound = _Bound(rt, flag, alloc)
    seen = []
    for frame in frames:
        bound.write(frame)
        if sync == "before":
            bound.sync(bound.out_mem, mode)
        rt.run(bound.ctx)
        if sync == "after":
            bound.sync(bound.out_mem, mode)
        seen.append(bound.output())
    rt.destroy(bound.ctx)
    return seen


def _assert_frames(seen: list, expected: list) -> None:
    for k, (got, want) in enumerate(zip(seen, expected)):
        np.testing.assert_array_equal(got, want, err_msg=f"frame {k}")


def test_output_flag_with_no_sync_reads_the_first_frame_for_ever(rt):
    """The CPU holds no line of a freshly bound mem, so the first run shows; the
    CPU then holds the lines it read, and no later run reaches its view."""
    frames = _frames(4, 128)
    truth = _truth(rt, frames)
    _assert_frames(_loop(rt, frames, "none"), [truth[0]] * 4)


@pytest.mark.parametrize("sync", ["after", "before"])
@pytest.mark.parametrize("mode", [abi.RKNN_MEMORY_SYNC_FROM_DEVICE, abi.RKNN_MEMORY_SYNC_BIDIRECTIONAL])
def test_output_flag_with_an_invalidate_after_or_before_the_run_reads_each_frame(rt, sync, mode):
    """An invalidate, not a snapshot: one before the run leaves the CPU no line to
    read stale, so the run's bytes show (on a board the safe place is still after
    the run: the CPU may refill lines in between, A60)."""
    frames = _frames(4, 128)
    truth = _truth(rt, frames)
    _assert_frames(_loop(rt, frames, sync, mode), truth)


@pytest.mark.parametrize("sync", ["after", "before"])
def test_to_device_alone_does_not_refresh_the_output_view(rt, sync):
    frames = _frames(3, 128)
    truth = _truth(rt, frames)
    _assert_frames(_loop(rt, frames, sync, abi.RKNN_MEMORY_SYNC_TO_DEVICE), [truth[0]] * 3)


def test_a_late_invalidate_shows_the_device_bytes_of_now(rt):
    frames = _frames(3, 128)
    truth = _truth(rt, frames)
    bound = _Bound(rt, OUT_FLAG)
    for frame in frames:
        bound.write(frame)
        rt.run(bound.ctx)
    np.testing.assert_array_equal(bound.output(), truth[0])
    bound.sync(bound.out_mem, abi.RKNN_MEMORY_SYNC_FROM_DEVICE)
    np.testing.assert_array_equal(bound.output(), truth[2])  # the last run's bytes, not the first's


def test_a_read_between_the_invalidate_and_the_run_is_not_seen(rt):
    """The simulator cannot see reads: it takes the CPU to read each output right
    after its run.  A sync, a read, then the next run: that run shows here (on a
    board, the lines the read brought in may hide it: A60 says so)."""
    frames = _frames(2, 128)
    truth = _truth(rt, frames)
    bound = _Bound(rt, OUT_FLAG)
    bound.write(frames[0])
    rt.run(bound.ctx)
    bound.sync(bound.out_mem, abi.RKNN_MEMORY_SYNC_FROM_DEVICE)
    np.testing.assert_array_equal(bound.output(), truth[0])
    bound.write(frames[1])
    rt.run(bound.ctx)
    np.testing.assert_array_equal(bound.output(), truth[1])


def test_outputs_get_reads_the_stale_cpu_view_too(rt):
    """rknn_api.h says not to combine the OUTPUT flag with rknn_outputs_get."""
    frames = _frames(2, 128)
    truth = _truth(rt, frames)
    bound = _Bound(rt, OUT_FLAG)
    for frame in frames:
        bound.write(frame)
        rt.run(bound.ctx)
    out = abi.rknn_output(index=0, want_float=0)
    rt.outputs_get(bound.ctx, [out])
    got = buffers.output_view(out, np.uint8).copy()
    rt.outputs_release(bound.ctx, [out])
    np.testing.assert_array_equal(got, truth[0][:got.size])


def test_input_flag_runs_on_what_the_last_to_device_sync_left(rt):
    frames = _frames(2, 128)
    truth = _truth(rt, frames)
    bound = _Bound(rt, IN_FLAG)
    bound.write(frames[0])
    bound.sync(bound.in_mem, abi.RKNN_MEMORY_SYNC_TO_DEVICE)
    rt.run(bound.ctx)
    np.testing.assert_array_equal(bound.output(), truth[0])
    bound.write(frames[1])  # no sync: the NPU still reads frame 0
    rt.run(bound.ctx)
    np.testing.assert_array_equal(bound.output(), truth[0])
    bound.sync(bound.in_mem, abi.RKNN_MEMORY_SYNC_BIDIRECTIONAL)
    rt.run(bound.ctx)
    np.testing.assert_array_equal(bound.output(), truth[1])
    bound.write(frames[0])
    bound.sync(bound.in_mem, abi.RKNN_MEMORY_SYNC_FROM_DEVICE)  # the wrong direction
    rt.run(bound.ctx)
    np.testing.assert_array_equal(bound.output(), truth[1])


def test_input_flag_takes_the_bytes_present_at_bind_time(rt):
    frames = _frames(2, 128)
    truth = _truth(rt, frames)
    ctx = rt.init(_path("digits_cnn"), IN_FLAG)
    attr = _attr(rt, ctx, abi.RKNN_QUERY_NATIVE_INPUT_ATTR)
    mem = rt.create_mem(ctx, attr.size_with_stride)
    buffers.mem_view(mem)[:] = frames[1]
    rt.set_io_mem(ctx, mem, attr)
    rt.run(ctx)
    out = abi.rknn_output(index=0, want_float=0)
    rt.outputs_get(ctx, [out])  # the runtime's own output buffer: coherent
    got = buffers.output_view(out, np.uint8).copy()
    rt.outputs_release(ctx, [out])
    np.testing.assert_array_equal(got, truth[1][:got.size])


def test_inputs_set_into_a_stale_bound_input_does_not_reach_the_npu(rt):
    """rknn_api.h says not to combine the INPUT flag with rknn_inputs_set."""
    frames = _frames(2, 128)
    truth = _truth(rt, frames)
    bound = _Bound(rt, IN_FLAG)
    bound.write(frames[0])
    bound.sync(bound.in_mem, abi.RKNN_MEMORY_SYNC_TO_DEVICE)
    rt.inputs_set(bound.ctx, [abi.rknn_input(index=0, buf=frames[1].ctypes.data, size=128,
                                             pass_through=1)])
    rt.run(bound.ctx)
    np.testing.assert_array_equal(bound.output(), truth[0])


@pytest.mark.parametrize("flag,alloc", [
    (0, abi.RKNN_FLAG_MEMORY_CACHEABLE),
    (IN_FLAG | OUT_FLAG, abi.RKNN_FLAG_MEMORY_NON_CACHEABLE),
])
def test_plain_contexts_and_non_cacheable_mems_stay_coherent(rt, flag, alloc):
    frames = _frames(2, 128)
    truth = _truth(rt, frames)
    bound = _Bound(rt, flag, alloc)
    for frame, expected in zip(frames, truth):
        bound.write(frame)
        rt.run(bound.ctx)
        np.testing.assert_array_equal(bound.output(), expected)


def test_a_duplicated_context_keeps_the_flags(rt):
    frames = _frames(2, 128)
    truth = _truth(rt, frames)
    first = _Bound(rt, OUT_FLAG)
    dup = rt.dup_context(first.ctx)
    out_attr = _attr(rt, dup, abi.RKNN_QUERY_NATIVE_OUTPUT_ATTR)
    in_attr = _attr(rt, dup, abi.RKNN_QUERY_NATIVE_INPUT_ATTR)
    in_mem, out_mem = rt.create_mem(dup, 128), rt.create_mem(dup, out_attr.size_with_stride)
    rt.set_io_mem(dup, in_mem, in_attr)
    rt.set_io_mem(dup, out_mem, out_attr)
    for frame in frames:
        buffers.mem_view(in_mem)[:] = frame
        rt.run(dup)
    np.testing.assert_array_equal(buffers.mem_view(out_mem), truth[0])  # frame 1 stays out of view
    rt.mem_sync(dup, out_mem, abi.RKNN_MEMORY_SYNC_FROM_DEVICE)
    np.testing.assert_array_equal(buffers.mem_view(out_mem), truth[1])


def test_rebinding_to_a_plain_context_is_coherent_again(rt):
    frames = _frames(2, 128)
    truth = _truth(rt, frames)
    bound = _Bound(rt, OUT_FLAG)
    shared = rt.create_mem2(0, bound.out_attr.size_with_stride, abi.RKNN_MEM_FLAG_ALLOC_NO_CONTEXT)
    rt.set_io_mem(bound.ctx, shared, bound.out_attr)
    for frame in frames:
        bound.write(frame)
        rt.run(bound.ctx)  # frame 0 shows; frame 1's bytes wait for a FROM_DEVICE sync
    np.testing.assert_array_equal(buffers.mem_view(shared), truth[0])
    plain = rt.init(_path("digits_cnn"))
    rt.set_io_mem(plain, shared, _attr(rt, plain, abi.RKNN_QUERY_NATIVE_OUTPUT_ATTR))
    rt.inputs_set(plain, [abi.rknn_input(index=0, buf=frames[1].ctypes.data, size=128, pass_through=1)])
    rt.run(plain)
    view = buffers.mem_view(shared)
    np.testing.assert_array_equal(view, truth[1])  # the plain run shows without a sync
    rt.mem_sync(plain, shared, abi.RKNN_MEMORY_SYNC_FROM_DEVICE)  # nothing stale left to show
    np.testing.assert_array_equal(view, truth[1])
    rt.destroy_mem(0, shared)


def test_the_cache_assumption_is_listed_with_a_board_check():
    by_id = {key: (text, check) for key, text, check in ASSUMPTIONS}
    stale = [key for key, (text, _) in by_id.items() if "RKNN_FLAG_DISABLE_FLUSH_OUTPUT_MEM_CACHE" in text
             and "rknn_set_io_mem" in text]
    assert len(stale) == 1
    text, check = by_id[stale[0]]
    assert "FROM_DEVICE" in text and "TO_DEVICE" in text and "NON_CACHEABLE" in text
    # an invalidate, not a copy; where the sync belongs on a board; the worst case it plays
    assert "copies nothing" in text and "invalidate" in text and "the safe place is after" in text
    assert "worst case" in text and "stale lines only" in text
    assert "board" in check and "DISABLE_FLUSH_INPUT_MEM_CACHE" in check and "fraction stale" in check
    assert by_id["A11"][0].startswith("Memory is coherent unless a context was made with a DISABLE_FLUSH flag")
    assert "refuses those two flags" not in by_id["A11"][0]


# ----------------------------------------------------------------- values_replayed
def test_values_replayed_writes_the_last_outputs_without_an_inference(rt):
    frames = _frames(3, 128)
    truth = _truth(rt, frames)
    bound = _Bound(rt)
    values = rt._contexts[bound.ctx].model.values
    bound.write(frames[0])
    rt.run(bound.ctx)
    before = values.inferences
    with values_replayed():
        assert replaying()
        for frame in frames[1:]:
            bound.write(frame)
            rt.run(bound.ctx)
            np.testing.assert_array_equal(bound.output(), truth[0])  # frame 0's values again
    assert not replaying()
    assert values.inferences == before
    bound.write(frames[2])
    rt.run(bound.ctx)
    np.testing.assert_array_equal(bound.output(), truth[2])


def test_values_replayed_nests_and_holds_in_every_thread():
    seen = []
    with values_replayed():
        with values_replayed():
            pass
        worker = threading.Thread(target=lambda: seen.append(replaying()))
        worker.start()
        worker.join()
        assert replaying()
    assert seen == [True] and not replaying()
    with pytest.raises(RuntimeError):
        with values_replayed():
            raise RuntimeError("a failing block still ends the replay")
    assert not replaying()


def test_values_replayed_computes_once_when_nothing_was_computed_yet():
    from rknnlab.sim.model import identify
    runtime = SimRuntime("rk3588")
    try:
        ctx = runtime.init(_path("digits_cnn"))
        model = runtime._contexts[ctx].model
        model._values = None  # a fresh value source: nothing computed yet
        with values_replayed():
            runtime.run(ctx)
            runtime.run(ctx)
        assert model.values.inferences == 1
        assert identify(models.model_path("digits_cnn", "rk3588").read_bytes()) is model
    finally:
        runtime.close()


# ----------------------------------------------------------------- ppocr_det: chapter 6's calls together
@pytest.fixture(scope="module")
def ocr():
    """A ppocr_det runtime, two real letterboxed frames (uint8 NHWC) and the plain int8
    map of each from rknn_inputs_set + rknn_outputs_get (two inferences in all)."""
    runtime = SimRuntime("rk3588")
    frames = np.load(models.model_path("ppocr_det", "rk3588").parent / "toolkit_int8.npz")["inputs"][:2]
    ctx = runtime.init(_path("ppocr_det"))
    maps = []
    for frame in frames:
        runtime.inputs_set(ctx, [buffers.input_from_array(0, frame[None], abi.RKNN_TENSOR_NHWC)])
        runtime.run(ctx)
        out = abi.rknn_output(index=0, want_float=0)
        runtime.outputs_get(ctx, [out])
        maps.append(buffers.output_view(out, np.int8).reshape(480, 480).copy())
        runtime.outputs_release(ctx, [out])
    assert not np.array_equal(maps[0], maps[1]) and (maps[0] > -128).any()  # text found
    yield runtime, ctx, frames, maps
    runtime.close()


def _zero_copy(rt: SimRuntime, ctx: int, alloc: int = abi.RKNN_FLAG_MEMORY_CACHEABLE):
    """Bind a uint8 NHWC input mem and an int8 output mem, both with the native attr;
    returns (input attr, input mem, output attr, output mem)."""
    in_attr = _attr(rt, ctx, abi.RKNN_QUERY_NATIVE_INPUT_ATTR)
    in_attr.type = abi.RKNN_TENSOR_UINT8  # raw pixels; the model normalises (A13)
    out_attr = _attr(rt, ctx, abi.RKNN_QUERY_NATIVE_OUTPUT_ATTR)
    in_mem = rt.create_mem2(ctx, in_attr.size_with_stride, alloc)
    out_mem = rt.create_mem2(ctx, out_attr.size_with_stride, alloc)
    rt.set_io_mem(ctx, in_mem, in_attr)
    rt.set_io_mem(ctx, out_mem, out_attr)
    return in_attr, in_mem, out_attr, out_mem


def _write_rows(mem, attr: abi.rknn_tensor_attr, frame: np.ndarray) -> None:
    """A HxWx3 frame into an NHWC mem whose rows are w_stride pixels long."""
    h, w = frame.shape[:2]
    stride = max(attr.w_stride, w)
    buffers.mem_view(mem, shape=(h, stride, 3))[:, :w] = frame


def _channel0(mem, attr: abi.rknn_tensor_attr) -> np.ndarray:
    """Channel 0 of a native NC1HWC2 int8 output, read in place (a strided view)."""
    dims = tuple(attr.dims[:attr.n_dims])
    return buffers.mem_view(mem, np.int8, shape=dims)[0, 0, :, :, 0]


def test_ppocr_det_attrs_describe_its_buffers(ocr):
    rt, ctx, _, _ = ocr
    native_in = _attr(rt, ctx, abi.RKNN_QUERY_NATIVE_INPUT_ATTR)
    native_out = _attr(rt, ctx, abi.RKNN_QUERY_NATIVE_OUTPUT_ATTR)
    plain_out = _attr(rt, ctx, abi.RKNN_QUERY_OUTPUT_ATTR)
    assert native_in.fmt == abi.RKNN_TENSOR_NHWC and list(native_in.dims[:4]) == [1, 480, 480, 3]
    assert native_in.size_with_stride == 480 * max(native_in.w_stride, 480) * 3
    assert native_out.fmt == abi.RKNN_TENSOR_NC1HWC2 and native_out.type == abi.RKNN_TENSOR_INT8
    c1, c2 = native_out.dims[1], native_out.dims[4]
    assert c1 * c2 >= 1 and native_out.size_with_stride == c1 * 480 * 480 * c2
    assert list(plain_out.dims[:4]) == [1, 1, 480, 480] and plain_out.size == 480 * 480
    assert (plain_out.zp, plain_out.scale) == (native_out.zp, native_out.scale)
    mem = rt.query(ctx, abi.RKNN_QUERY_MEM_SIZE)
    assert mem.total_dma_allocated_size == (mem.total_weight_size + mem.total_internal_size
                                            + native_in.size_with_stride + native_out.size_with_stride)


def test_zero_copy_uint8_input_and_int8_output_read_in_place(ocr):
    rt, ctx, frames, maps = ocr
    dup = rt.dup_context(ctx)
    try:
        in_attr, in_mem, out_attr, out_mem = _zero_copy(rt, dup)
        for frame, expected in zip(frames, maps):
            _write_rows(in_mem, in_attr, frame)
            rt.mem_sync(dup, in_mem, abi.RKNN_MEMORY_SYNC_TO_DEVICE)
            rt.run(dup)
            rt.mem_sync(dup, out_mem, abi.RKNN_MEMORY_SYNC_FROM_DEVICE)
            np.testing.assert_array_equal(_channel0(out_mem, out_attr), expected)
    finally:
        rt.destroy(dup)


def test_dup_context_shares_the_weights(ocr):
    rt, ctx, _, _ = ocr
    dup = rt.dup_context(ctx)
    try:
        first, second = (rt.query(c, abi.RKNN_QUERY_MEM_SIZE) for c in (ctx, dup))
        assert second.total_dma_allocated_size == first.total_dma_allocated_size - first.total_weight_size
        assert rt._contexts[dup].weights is rt._contexts[ctx].weights
    finally:
        rt.destroy(dup)


@pytest.mark.parametrize("mask,cores", [
    (abi.RKNN_NPU_CORE_0, (0,)), (abi.RKNN_NPU_CORE_1, (1,)), (abi.RKNN_NPU_CORE_2, (2,)),
    (abi.RKNN_NPU_CORE_0_1_2, (0, 1, 2)), (abi.RKNN_NPU_CORE_AUTO, None),
])
def test_core_mask_per_context_sets_the_cores_and_the_modeled_time(ocr, mask, cores):
    rt, ctx, _, _ = ocr
    dup = rt.dup_context(ctx)
    try:
        rt.set_core_mask(dup, mask)
        with values_replayed():
            rt.run(dup)
        used = rt._contexts[dup].last_run_cores
        assert used == cores if cores else len(used) == 1
        modeled = modeled_run_ms("ppocr_det", "rk3588", mask if cores else abi.RKNN_NPU_CORE_0)
        assert rt.query(dup, abi.RKNN_QUERY_PERF_RUN).run_duration == round(modeled * 1e3)
        assert rt._contexts[ctx].core_mask == abi.RKNN_NPU_CORE_AUTO  # the other context keeps its own
    finally:
        rt.destroy(dup)
    assert modeled_run_ms("ppocr_det", "rk3588", abi.RKNN_NPU_CORE_0_1_2) < \
        modeled_run_ms("ppocr_det", "rk3588", abi.RKNN_NPU_CORE_0)


def _threads_wall(rt: SimRuntime, ctx: int, masks, runs: int) -> float:
    """Wall seconds for one thread per mask, each with its own context, ``runs`` runs each."""
    contexts = [rt.dup_context(ctx) for _ in masks]
    for context, mask in zip(contexts, masks):
        rt.set_core_mask(context, mask)
    start = threading.Barrier(len(contexts) + 1)

    def work(context: int) -> None:
        start.wait()
        for _ in range(runs):
            rt.run(context)

    threads = [threading.Thread(target=work, args=(c,)) for c in contexts]
    try:
        with values_replayed():
            for thread in threads:
                thread.start()
            start.wait()
            began = time.perf_counter()
            for thread in threads:
                thread.join()
            return time.perf_counter() - began
    finally:
        for context in contexts:
            rt.destroy(context)


def test_three_workers_overlap_on_three_cores_and_queue_on_one(ocr):
    rt, ctx, _, _ = ocr
    runs = 4
    one_run = modeled_run_ms("ppocr_det", "rk3588", abi.RKNN_NPU_CORE_0) / 1e3
    spread = _threads_wall(rt, ctx, (abi.RKNN_NPU_CORE_0, abi.RKNN_NPU_CORE_1, abi.RKNN_NPU_CORE_2), runs)
    auto = _threads_wall(rt, ctx, (abi.RKNN_NPU_CORE_AUTO,) * 3, runs)
    queued = _threads_wall(rt, ctx, (abi.RKNN_NPU_CORE_0,) * 3, runs)
    assert queued >= 3 * runs * one_run  # one core: the twelve runs one after another
    assert spread < 0.75 * queued and auto < 0.75 * queued  # three cores: about a third (generous)


def test_replayed_run_lasts_the_modeled_time(ocr):
    rt, ctx, frames, _ = ocr
    dup = rt.dup_context(ctx)
    try:
        rt.set_core_mask(dup, abi.RKNN_NPU_CORE_0)
        in_attr, in_mem, _, _ = _zero_copy(rt, dup)
        values = rt._contexts[dup].model.values
        before = values.inferences
        modeled = modeled_run_ms("ppocr_det", "rk3588", abi.RKNN_NPU_CORE_0) / 1e3
        walls = []
        with values_replayed():
            for k in range(9):  # a new frame each time: no cached values to fall back on
                _write_rows(in_mem, in_attr, np.roll(frames[k % 2], k, axis=1))
                began = time.perf_counter()
                rt.run(dup)
                walls.append(time.perf_counter() - began)
        assert values.inferences == before
        assert min(walls) >= modeled
        assert sorted(walls)[4] < 2 * modeled  # the median: the modeled time, not an inference
    finally:
        rt.destroy(dup)


def test_output_flag_keeps_the_first_text_map_until_synced(ocr):
    """Chapter 6's stale output: with no sync the boxes stop changing after the first frame."""
    rt, _, frames, maps = ocr
    ctx = rt.init(_path("ppocr_det"), OUT_FLAG)
    try:
        in_attr, in_mem, out_attr, out_mem = _zero_copy(rt, ctx)
        view = _channel0(out_mem, out_attr)  # the numpy view a pipeline reads
        for frame in frames:
            _write_rows(in_mem, in_attr, frame)
            rt.run(ctx)
            np.testing.assert_array_equal(view, maps[0])  # the first frame's map, every frame
        rt.mem_sync(ctx, out_mem, abi.RKNN_MEMORY_SYNC_FROM_DEVICE)
        np.testing.assert_array_equal(view, maps[1])
        for frame, expected in zip(frames, maps):  # a sync before each run: each frame's own map
            _write_rows(in_mem, in_attr, frame)
            rt.mem_sync(ctx, out_mem, abi.RKNN_MEMORY_SYNC_FROM_DEVICE)
            rt.run(ctx)
            np.testing.assert_array_equal(view, expected)
    finally:
        rt.destroy(ctx)


def test_whole_padding_blocks_are_zeroed_at_the_first_run_into_a_mem(ocr):
    rt, ctx, frames, maps = ocr
    dup = rt.dup_context(ctx)
    try:
        in_attr, in_mem, out_attr, out_mem = _zero_copy(rt, dup)
        blocks = buffers.mem_view(out_mem, np.int8, shape=tuple(out_attr.dims[:5]))
        blocks[...] = 7  # garbage everywhere before the first run
        for frame, expected in zip(frames, maps):
            _write_rows(in_mem, in_attr, frame)
            rt.run(dup)
            np.testing.assert_array_equal(blocks[0, 0, :, :, 0], expected)
            assert not blocks[0, 0, :, :, 1:].any() and not blocks[0, 1:].any()
    finally:
        rt.destroy(dup)


def test_input_flag_runs_last_synced_frame_through_a_uint8_binding(ocr):
    """The pipeline's input: raw pixels in a mem bound with the native attr set to UINT8."""
    rt, _, frames, maps = ocr
    ctx = rt.init(_path("ppocr_det"), IN_FLAG)
    try:
        in_attr, in_mem, out_attr, out_mem = _zero_copy(rt, ctx)
        _write_rows(in_mem, in_attr, frames[0])
        rt.mem_sync(ctx, in_mem, abi.RKNN_MEMORY_SYNC_TO_DEVICE)
        rt.run(ctx)
        np.testing.assert_array_equal(_channel0(out_mem, out_attr), maps[0])
        _write_rows(in_mem, in_attr, frames[1])  # forgot the sync: the NPU reads frame 0 again
        rt.run(ctx)
        np.testing.assert_array_equal(_channel0(out_mem, out_attr), maps[0])
        rt.mem_sync(ctx, in_mem, abi.RKNN_MEMORY_SYNC_TO_DEVICE)
        rt.run(ctx)
        np.testing.assert_array_equal(_channel0(out_mem, out_attr), maps[1])
    finally:
        rt.destroy(ctx)


@pytest.mark.parametrize("soc,c2", [("rk3576", 16), ("rk3568", 8), ("rk3562", 16)])
def test_ppocr_det_on_the_other_socs(ocr, soc, c2):
    """Another SoC's build runs on that SoC's simulator (C2 from dims[4]); without a
    shipped .rknn, rknn_init of the rk3588 build says where that SoC's report is."""
    _, _, frames, maps = ocr
    runtime = SimRuntime(soc)
    try:
        rknn = models.load_report("ppocr_det", soc).rknn_path
        if not rknn.exists():
            with pytest.raises(errors.RknnTargetPlatformUnmatchError, match="only the compiler report"):
                runtime.init(_path("ppocr_det"))
            return
        ctx = runtime.init(str(rknn))
        native_out = _attr(runtime, ctx, abi.RKNN_QUERY_NATIVE_OUTPUT_ATTR)
        assert native_out.dims[4] == c2
        runtime.inputs_set(ctx, [buffers.input_from_array(0, frames[0][None], abi.RKNN_TENSOR_NHWC)])
        runtime.run(ctx)
        assert runtime.query(ctx, abi.RKNN_QUERY_PERF_RUN).run_duration == round(modeled_run_ms("ppocr_det", soc) * 1e3)
        out = abi.rknn_output(index=0, want_float=0)
        runtime.outputs_get(ctx, [out])
        got = buffers.output_view(out, np.int8).reshape(480, 480)
        # the same twin, each build's own quantization: most pixels agree with rk3588's map
        assert np.mean(np.abs(got.astype(int) - maps[0]) <= 1) > 0.99
        runtime.outputs_release(ctx, [out])
    finally:
        runtime.close()
    # faster or slower than rk3588 as the model zoo's published FPS say (rk3576 is faster)
    from rknnlab.profile.timing import published_fps
    zoo = published_fps(["ppocr_det"])
    assert ((modeled_run_ms("ppocr_det", soc) > modeled_run_ms("ppocr_det", "rk3588"))
            == (zoo[("ppocr_det", soc)] < zoo[("ppocr_det", "rk3588")]))
