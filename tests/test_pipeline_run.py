"""rknnlab.pipeline.loop / workers / steady: the video pipeline's loop measured on the
simulator (ppocr_det, a few frames each: the file runs in well under a minute)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

import rknnlab
from rknnlab.pipeline import loop
from rknnlab.pipeline.loop import (STAGES, Worker, compare_modes, distinct_frames, inputs_set_copies, int8_channel0,
                                  mask_name, mask_value, run, verdict_words)
from rknnlab.pipeline.steady import SteadyState, steady_state
from rknnlab.experiment.timing import Comparison
from rknnlab.pipeline import workers as workers_module
from rknnlab.pipeline.workers import bound, configurations, npu_runs_at_once, scaling
from rknnlab.rknn import abi
from rknnlab.sim import modeled_run_ms

ROOT = Path(__file__).resolve().parents[1]
TRACES = sorted((ROOT / "data" / "traces").glob("ch06_steady_*.json"))


@pytest.fixture(scope="module")
def frames():
    return distinct_frames(4)


@pytest.fixture(scope="module")
def rt():
    return rknnlab.open_runtime("sim")


def _blank_frame(like):
    from rknnlab.pipeline.frames import Nv12Frame
    data = np.full(like.data.size, 128, np.uint8)      # mid-grey, no text
    return Nv12Frame(data, like.width, like.height, like.stride, like.height_stride, 0)


# --------------------------------------------------------------------------- per-frame allocation
def test_zero_copy_allocates_nothing_per_frame_and_the_planted_buffer_shows(frames, rt):
    clean = run(frames, n_frames=6, runtime=rt, values=False, measure_heap=True)
    planted = run(frames, n_frames=6, runtime=rt, values=False, measure_heap=True, planted="letterbox_malloc")
    clean_rise = np.nanmax(clean.heap_rise, axis=1)
    planted_rise = np.nanmax(planted.heap_rise, axis=1)
    assert np.median(clean_rise) <= 64 and clean_rise.max() < 1024, clean.heap_rise
    # the planted buffer is 480 x 480 x 3 bytes, alive from the convert stage on
    assert np.all(planted_rise >= 480 * 480 * 3), planted.heap_rise
    assert np.all(planted.heap_rise[:, STAGES.index("convert")] >= 480 * 480 * 3)


def test_the_peak_sees_temporaries_freed_inside_a_stage_the_rise_does_not(frames, rt, monkeypatch):
    real = loop.find_boxes

    def find_boxes_with_a_temporary(*args, **kwargs):
        scratch = np.ones(1 << 20, np.uint8)       # 1 MiB, made and freed inside the post stage
        del scratch
        return real(*args, **kwargs)

    monkeypatch.setattr(loop, "find_boxes", find_boxes_with_a_temporary)
    both = run(frames, n_frames=4, runtime=rt, values=False, measure_heap="both")
    post = STAGES.index("post")
    assert np.all(both.heap_peak[:, post] >= 1 << 20), both.heap_peak
    assert np.all(both.heap_rise[:, post] < 64 * 1024), both.heap_rise     # freed before the stage ends
    assert np.all(both.heap_peak[:, STAGES.index("convert")] < 1 << 20)
    import tracemalloc
    assert not tracemalloc.is_tracing()          # started for the run, stopped after it


def test_heap_instruments_one_at_a_time(frames, rt):
    rise = run(frames, n_frames=2, runtime=rt, values=False, measure_heap=True)
    peak = run(frames, n_frames=2, runtime=rt, values=False, measure_heap="peak", planted="letterbox_malloc")
    plain = run(frames, n_frames=2, runtime=rt, values=False)
    assert np.isfinite(rise.heap_rise).all() and np.isnan(rise.heap_peak).all()
    assert np.isnan(peak.heap_rise).all() and np.isfinite(peak.heap_peak).all()
    assert np.isnan(plain.heap_rise).all() and np.isnan(plain.heap_peak).all()
    # the planted 480 x 480 x 3 buffer is made inside the convert stage
    assert np.all(peak.heap_peak[:, STAGES.index("convert")] >= 480 * 480 * 3)
    with pytest.raises(ValueError, match="measure_heap"):
        run(frames, n_frames=1, runtime=rt, measure_heap="all")


def test_general_mode_allocates_nothing_per_frame_either(frames, rt):
    r = run(frames, mode="general", n_frames=6, runtime=rt, values=False, measure_heap=True)
    assert np.median(np.nanmax(r.heap_rise, axis=1)) <= 64
    planted = run(frames, mode="general", n_frames=6, runtime=rt, values=False, measure_heap=True,
                  planted="letterbox_malloc")
    assert np.all(np.nanmax(planted.heap_rise, axis=1) >= 480 * 480 * 3)
    assert np.array_equal(planted.n_boxes, r.n_boxes)      # the same frames, the same boxes


# --------------------------------------------------------------------------- boxes
def test_boxes_found_on_a_text_frame_and_not_on_a_blank_one(frames, rt):
    text = run(frames[:1], n_frames=1, runtime=rt, values=True, warmup=0)
    blank = run([_blank_frame(frames[0])], n_frames=1, runtime=rt, values=True, warmup=0)
    assert text.n_boxes[0] >= 1 and len(text.boxes[0]) == text.n_boxes[0]
    assert blank.n_boxes[0] == 0
    b = text.boxes[0][0]   # in frame coordinates (the letterbox mapped back)
    assert 0 <= b.x0 < b.x1 <= frames[0].width and 0 <= b.y0 < b.y1 <= frames[0].height


def test_general_and_zero_copy_find_the_same_boxes(frames, rt):
    a = run(frames[:1], n_frames=1, runtime=rt, values=True, warmup=0, mode="general")
    b = run(frames[:1], n_frames=1, runtime=rt, values=True, warmup=0, mode="zero_copy")
    key = lambda boxes: sorted((round(x.x0), round(x.y0), round(x.x1), round(x.y1)) for x in boxes)
    assert a.n_boxes[0] >= 1 and key(a.boxes[0]) == key(b.boxes[0])


def test_the_native_output_is_read_in_place(rt):
    from rknnlab import models
    ctx = rt.init(str(models.model_path("ppocr_det", "rk3588")))
    try:
        w = Worker(rt, ctx, "zero_copy")
        try:
            assert w.out_attr.fmt == abi.RKNN_TENSOR_NC1HWC2
            assert np.shares_memory(w.out_map, w.out_buf)
            assert w.out_map.shape == (480, 480)
            assert w.in_mem.contents.size == w.in_attr.size_with_stride
        finally:
            w.close()
    finally:
        rt.destroy(ctx)


def test_int8_channel0_takes_channel_0_of_nc1hwc2_with_padded_rows():
    c1, h, w, row, c2 = 2, 3, 5, 8, 16
    attr = abi.rknn_tensor_attr(n_dims=5, fmt=abi.RKNN_TENSOR_NC1HWC2, size_with_stride=c1 * h * row * c2)
    for k, d in enumerate((1, c1, h, w, c2)):
        attr.dims[k] = d
    full = np.random.default_rng(0).integers(-128, 128, (c1, h, row, c2)).astype(np.int8)
    view = int8_channel0(full.reshape(-1).view(np.uint8), attr, native=True)
    assert np.array_equal(view, full[0, :, :w, 0])
    assert np.shares_memory(view, full)


# --------------------------------------------------------------------------- workers
def test_three_workers_on_three_cores_overlap_their_runs(frames, rt):
    r = run(frames, workers=3, n_frames=9, runtime=rt, values=False, keep_boxes=False)
    assert sorted(set(r.worker.tolist())) == [0, 1, 2]
    assert [mask_name(m) for m in r.masks] == ["CORE_0", "CORE_1", "CORE_2"]
    runs = r.stage_ms()[:, STAGES.index("run")]
    assert r.wall_s * 1e3 < runs.sum()          # the NPU runs overlapped in wall time
    t = r.times[:, STAGES.index("run")]
    overlapping = any(r.worker[i] != r.worker[j] and t[i, 0] < t[j, 1] and t[j, 0] < t[i, 1]
                      for i in range(r.n_frames) for j in range(i + 1, r.n_frames))
    assert overlapping


def test_gantt_data_is_consistent(frames, rt):
    r = run(frames, workers=2, n_frames=8, runtime=rt, values=False, keep_boxes=False)
    g = r.gantt()
    assert len(g) == 8 * len(STAGES) and "simulated RK3588" in g.attrs["source"]
    assert (g["end_ms"] >= g["start_ms"]).all() and (g["start_ms"] >= 0).all()
    for i in range(r.n_frames):        # the stages of a frame follow one another
        t = r.times[i]
        assert np.all(t[1:, 0] >= t[:-1, 1])
        assert r.latencies_ms[i] >= (t[-1, 1] - t[0, 0]) * 1e3 - 1e-6
    for k in range(2):                 # one thread per context at a time: a worker's frames never overlap
        mine = np.sort(r.times[r.worker == k][:, [0, -1], :].reshape(-1, 4)[:, [0, 3]], axis=0)
        assert np.all(mine[1:, 0] >= mine[:-1, 1])
    assert abs(r.fps - r.n_frames / r.wall_s) < 1e-9
    table = r.table()
    assert list(table.columns[3:8]) == [f"{s}_ms" for s in STAGES]
    assert table.attrs["host_cpus"] == os.cpu_count()


def test_scaling_rows_sources_and_host(frames, rt):
    t = scaling(workers=(1, 3), n_frames=9, frames=frames, runtime=rt)
    assert list(t["config"]) == ["1 x CORE_0", "1 x 0_1_2", "3 x CORE_0/CORE_1/CORE_2", "3 x AUTO"]
    assert t.attrs["host_cpus"] == os.cpu_count() and t.attrs["npu_cores"] == 3
    assert "simulated RK3588" in t.attrs["source"] and "replayed" in t.attrs["source"]
    assert str(os.cpu_count()) in t.attrs["note"]
    three = t.set_index("config").loc["3 x CORE_0/CORE_1/CORE_2"]
    assert three["fps"] > t["fps"].iloc[0]       # three cores: more frames per second than one
    assert t["speedup"].iloc[0] == 1.0
    # each row keeps its run: a Gantt drawn from it is the row's own measurement
    runs = t.attrs["runs"]
    assert list(runs) == list(t["config"])
    for _, row in t.iterrows():
        r = runs[row["config"]]
        assert r.workers == row["workers"] and r.fps == row["fps"] and r.n_frames == 9
    # the rate the row's own stage medians allow bounds the measured rate; the limit names the smallest term
    cpus = os.cpu_count()
    assert set(t["limit"]) <= {"one worker's frame", f"host CPUs ({cpus})", "NPU cores (1 at once)",
                               "NPU cores (3 at once)"}
    assert (t["fps"] <= t["bound_fps"] * 1.1).all(), t[["config", "fps", "bound_fps"]]
    # the terms are work, not waiting: the NPU time is the runtime's own account, the CPU work thread time
    one = t.set_index("config").loc["1 x CORE_0"]
    assert one["npu_ms"] == pytest.approx(modeled_run_ms("ppocr_det", "rk3588", abi.RKNN_NPU_CORE_0), abs=0.01)
    assert (t["run_cpu_ms"] < t["npu_ms"]).all()         # rknn_run blocks: the simulator sleeps, no CPU
    r = t.attrs["runs"]["3 x CORE_0/CORE_1/CORE_2"]
    assert (r.cpu_s <= r.stage_ms() / 1e3 + 1e-3).all()  # a thread's CPU time never exceeds its wall time


def test_the_bound_names_its_smallest_term():
    # 3 workers whose CPU work per frame is 4 ms on 2 CPUs: the CPUs allow 500/s, the NPU 3/7 ms = 429/s
    fps, limit = bound(3, cpu_ms=4.0, run_cpu_ms=0.0, npu_ms=7.0, host_cpus=2, at_once=3)
    assert limit == "one worker's frame" and fps == pytest.approx(3000 / 11)
    fps, limit = bound(3, cpu_ms=5.0, run_cpu_ms=1.0, npu_ms=2.0, host_cpus=2, at_once=3)
    assert limit == "host CPUs (2)" and fps == pytest.approx(2000 / 6)
    fps, limit = bound(3, cpu_ms=0.5, run_cpu_ms=0.0, npu_ms=7.0, host_cpus=8, at_once=1)
    assert limit == "NPU cores (1 at once)" and fps == pytest.approx(1000 / 7)
    # the CPU work inside rknn_run overlaps the NPU's time: counted once in a worker's frame
    fps, _ = bound(1, cpu_ms=2.0, run_cpu_ms=1.5, npu_ms=7.0, host_cpus=8, at_once=1)
    assert fps == pytest.approx(1000 / 9)


@pytest.mark.parametrize("soc, configs", [
    ("rk3576", ["1 x CORE_0", "1 x 0_1", "2 x CORE_0/CORE_1", "3 x AUTO"]),
    ("rk3568", ["1 x not set", "2 x not set", "3 x not set"]),
])
def test_scaling_uses_only_the_masks_the_soc_has(frames, soc, configs):
    t = scaling(n_frames=4, frames=frames, soc=soc)
    assert list(t["config"]) == configs
    assert soc.upper() in t.attrs["source"] and (t["fps"] > 0).all()
    assert len(configurations("rk3588")) == 5 and configurations("rk3562") == configurations("rk3568")


def test_scaling_warms_up_before_its_first_row(frames, rt, monkeypatch):
    calls = []
    real = workers_module.run

    def counting(*args, **kwargs):
        calls.append(kwargs["n_frames"])
        return real(*args, **kwargs)

    monkeypatch.setattr(workers_module, "run", counting)
    t = scaling(workers=(1,), n_frames=5, frames=frames, runtime=rt)
    assert calls == [workers_module.WARMUP_FRAMES] + [5] * len(t)       # one untimed run, then the rows


def test_npu_runs_at_once_counts_distinct_cores():
    c0, c1, c2 = abi.RKNN_NPU_CORE_0, abi.RKNN_NPU_CORE_1, abi.RKNN_NPU_CORE_2
    assert npu_runs_at_once([c0], 3) == 1
    assert npu_runs_at_once([c0, c0, c0], 3) == 1
    assert npu_runs_at_once([c0, c1, c2], 3) == 3
    assert npu_runs_at_once([abi.RKNN_NPU_CORE_AUTO] * 3, 3) == 3
    assert npu_runs_at_once([abi.RKNN_NPU_CORE_AUTO] * 3, 2) == 2
    assert npu_runs_at_once([abi.RKNN_NPU_CORE_0_1_2], 3) == 1


def test_compare_modes_table_and_its_uncertainty(frames, rt):
    t = compare_modes(n_frames=12, frames=frames, runtime=rt)
    assert list(t.index) == ["general", "zero_copy"]
    assert "simulated RK3588" in t.attrs["source"] and "general vs zero_copy" in t.attrs["source"]
    # 12 frames are too few for the timing comparison's rule: it says so, it does not guess; one phrase
    assert "cannot tell yet" in t.attrs["verdict"] and "apart" not in t.attrs["verdict"]
    assert t.loc["general", "input_ms"] > t.loc["zero_copy", "input_ms"]   # inputs_set copies; a sync does not
    # the per-frame total the verdict compares is a column: the 0.xx x can be read from the table
    assert "frame_ms" in t.columns and "total_ms" not in t.columns
    assert (t["frame_ms"] >= t["run_ms"]).all()
    c = t.attrs["comparison"]
    assert np.isnan(c.ratio) or c.ratio == pytest.approx(t.loc["zero_copy", "frame_ms"] / t.loc["general", "frame_ms"])
    # no buffer per frame: Python's own bookkeeping (a boxes list, a dict growing) moves the median
    # by tens of bytes (64 and 80 seen), a frame-sized buffer by 230,400 B or more
    assert (t["heap_per_frame_bytes"] <= 1024).all()
    for s in STAGES:
        assert (t[f"peak_{s}_bytes"] >= 0).all()
    assert (t["peak_own_bytes"] >= t[["peak_convert_bytes", "peak_post_bytes"]].max(axis=1)).all()
    assert (t["peak_own_bytes"] < 480 * 480 * 3).all()        # nothing frame-sized made per frame by our code
    assert t.loc["zero_copy", "dma_bytes"] > t.loc["general", "dma_bytes"]   # the io mems are counted (A9)
    planted = compare_modes(n_frames=4, frames=frames, runtime=rt, planted="letterbox_malloc", heap_frames=4)
    assert (planted["peak_convert_bytes"] >= 480 * 480 * 3).all() and (planted["peak_own_bytes"] >= 480 * 480 * 3).all()


def test_the_verdict_is_one_phrase():
    faster = Comparison("zero_copy", "general", "faster", ratio=0.87, low=0.84, high=0.90)
    assert verdict_words(faster) == "0.87x the time per frame (95% interval 0.84–0.90): faster"
    noisy = Comparison("zero_copy", "general", "cannot tell apart", ratio=0.87, low=0.84, high=0.90,
                       reason="within the runs' own noise: the medians of general's 10 consecutive parts "
                              "differ by up to 1.16x")
    words = verdict_words(noisy)
    assert words.startswith("0.87x the time per frame (95% interval 0.84–0.90): cannot tell yet (within")
    assert "apart" not in words and words.count("cannot tell") == 1 and "faster" not in words
    few = Comparison("zero_copy", "general", "cannot tell apart", ratio=0.9, reason="12 measured iterations")
    assert verdict_words(few) == ("0.90x the time per frame: cannot tell yet (12 measured iterations; "
                                  "more frames may tell)")


class _DeferredInputs:
    """A runtime whose inputs_set keeps a reference and reads the array only at rknn_run: the
    behaviour inputs_set_copies must tell apart from a copy."""

    def __init__(self, rt):
        self._rt, self._pending = rt, {}

    def __getattr__(self, name):
        return getattr(self._rt, name)

    def inputs_set(self, ctx, inputs):
        self._pending[ctx] = [(i, i.buf) for i in inputs]
        return 0

    def run(self, ctx, extend=None):
        import ctypes
        kept = []
        for i, buf in self._pending.pop(ctx, []):
            data = (ctypes.c_uint8 * i.size).from_address(buf)
            kept.append(buffers_input(i, np.frombuffer(data, np.uint8).copy()))
        if kept:
            self._rt.inputs_set(ctx, [k for k, _ in kept])
        return self._rt.run(ctx, extend)


def buffers_input(template, data):
    from rknnlab.rknn.buffers import input_from_array
    return input_from_array(template.index, data, fmt=template.fmt, type=template.type), data


def test_inputs_set_copies_the_frame_and_the_test_can_tell(rt):
    t = inputs_set_copies(rt)
    assert list(t["model"]) == ["mobilenet_v2", "ppocr_det"]
    assert list(t["input_bytes"]) == [224 * 224 * 3, 480 * 480 * 3]
    assert (t["inputs_set_us"] > 0).all()
    assert not t["change_after_call_seen"].any() and t["control_changed"].all()
    assert "simulated RK3588" in t.attrs["source"]
    deferred = inputs_set_copies(_DeferredInputs(rt), models=("ppocr_det",), calls=2)
    assert deferred["change_after_call_seen"].all() and deferred["control_changed"].all()


def test_bad_arguments_say_what_is_wrong(frames, rt):
    with pytest.raises(ValueError, match="mode"):
        run(frames, mode="fast", n_frames=1, runtime=rt)
    with pytest.raises(ValueError, match="planted"):
        run(frames, planted="leak", n_frames=1, runtime=rt)
    with pytest.raises(ValueError, match="core masks"):
        run(frames, workers=2, core_masks=["CORE_0"], n_frames=1, runtime=rt)
    with pytest.raises(ValueError, match="workers=1"):
        run(frames, workers=2, measure_heap=True, n_frames=2, runtime=rt)
    with pytest.raises(TypeError, match="Nv12Frame"):      # raised in a worker's thread, reported here
        run(["not a frame"], workers=2, n_frames=2, runtime=rt, values=False)
    with pytest.raises(ValueError, match="unknown core mask"):
        mask_value("CORE_7")
    assert mask_value("RKNN_NPU_CORE_0_1_2") == abi.RKNN_NPU_CORE_0_1_2 and mask_value("AUTO") == 0


# --------------------------------------------------------------------------- steady state
def test_a_recorded_long_run_loads_and_is_flat():
    assert TRACES, "no recorded steady-state trace in data/traces (python -m rknnlab.pipeline.steady)"
    s = SteadyState.load(TRACES[-1])
    assert s.meta["frames"] >= 1000 and "simulated RK3588" in s.source
    assert s.meta["command"].startswith("python -m rknnlab.pipeline.steady")
    assert set(s.variants) == {"clean", "letterbox_malloc"}
    for v in s.variants:
        assert s.status[v] == "ok"
        assert s.verdicts[v]["dma"]["verdict"] == "flat"
        assert s.verdicts[v]["heap"]["verdict"] != "grows"
    assert s.heap_rise["clean"]["per_frame_median_bytes"] <= 64
    assert s.heap_rise["letterbox_malloc"]["per_frame_median_bytes"] >= 480 * 480 * 3


def test_a_fresh_short_run_has_the_recorded_format(tmp_path):
    fresh = steady_state(n_frames=40, planted=(None, "letterbox_malloc"), warmup=3, progress=False)
    assert fresh.status == {"clean": "ok", "letterbox_malloc": "ok"}, fresh.status
    assert fresh.heap_rise["clean"]["per_frame_median_bytes"] <= 64
    assert fresh.heap_rise["letterbox_malloc"]["per_frame_median_bytes"] >= 480 * 480 * 3
    again = SteadyState.load(fresh.save(tmp_path / "fresh.json"))
    assert again.to_dict() == json.loads(json.dumps(fresh.to_dict()))
    if TRACES:
        recorded = json.loads(TRACES[-1].read_text())
        mine = fresh.to_dict()
        assert set(mine) == set(recorded)
        for key in ("meta", "verdicts", "heap_rise"):
            for v in mine[key] if key != "meta" else [None]:
                a = mine[key] if v is None else mine[key][v]
                b = recorded[key] if v is None else recorded[key][v]
                assert set(a) <= set(b) | {"recorded_on"}, (key, v, set(a) - set(b))


def test_a_bad_trace_is_refused(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"format": "something else"}))
    with pytest.raises(ValueError, match="not a steady-state trace"):
        SteadyState.load(bad)
    with pytest.raises(ValueError, match="planted"):
        steady_state(n_frames=10, planted="leak")


def test_tables_as_text_have_units_in_headers_and_one_format_per_column():
    import pandas as pd
    from rknnlab.pipeline.loop import show_table
    t = pd.DataFrame({"mode": ["general", "zero_copy"], "convert_ms": [0.9, 12.3456], "fps": [95.0, 126.4],
                      "heap_per_frame_bytes": [32.0, 691280.0], "dma_bytes": [44435579, 59872379],
                      "precision": [1.0, float("nan")], "control_changed": [True, False]}).set_index("mode")
    t.attrs["source"] = "simulated RK3588 — rknnlab sim: a test"
    lines = show_table(t).splitlines()
    head = lines[0]
    for h in ("convert (ms)", "frames/s", "heap rise/frame (B)", "DMA total (MiB)", "control changed"):
        assert h in head, head
    general, zero = lines[1].split(), lines[2].split()
    assert general[1:5] == ["0.90", "95", "32", "42.38"] and zero[1:5] == ["12.35", "126", "691,280", "57.10"]
    assert general[5] == "1" and zero[5] == "-"           # nothing to match: "-", not a number
    assert general[6] == "yes" and zero[6] == "no"
    # numbers right-aligned under their header
    assert head.index("frames/s") + len("frames/s") == lines[1].index("95") + 2
    assert lines[-1].startswith("source: simulated RK3588")
    with pytest.raises(KeyError, match="no column"):
        show_table(t, ["nope"])
