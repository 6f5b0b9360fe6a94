"""rknnlab.profile: the perf-detail parser (a board-format fixture with invented numbers,
and the simulator's real text), the compiler-report tables, frame phases on the
simulator, the CPU costs, glibc fragmentation in a subprocess, multi-core speedups."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

pd = pytest.importorskip("pandas", reason="rknnlab.profile returns pandas DataFrames (the lab extra)")

import rknnlab  # noqa: E402
from rknnlab import models, profile  # noqa: E402
from rknnlab.profile import cpu, heap, report  # noqa: E402
from rknnlab.rknn import abi  # noqa: E402
from rknnlab.sim import modeled_run_ms, npu  # noqa: E402
from rknnlab.sim.perf import layer_macs  # noqa: E402

FIXTURE = Path(__file__).parent / "fixtures" / "perf_detail_board_format.txt"


@pytest.fixture(scope="module")
def board_text() -> str:
    return FIXTURE.read_text()


@pytest.fixture(scope="module")
def rt():
    runtime = rknnlab.open_runtime("sim", "rk3588")
    yield runtime
    runtime.close()


def _sim_text(rt, model: str, mask: int = abi.RKNN_NPU_CORE_0, soc: str = "rk3588") -> str:
    ctx = rt.init(str(models.model_path(model, soc)), abi.RKNN_FLAG_COLLECT_PERF_MASK)
    try:
        rt.set_core_mask(ctx, mask)
        rt.inputs_set(ctx, profile.frame_inputs(rt, ctx))
        rt.run(ctx)
        return profile.perf_detail(rt, ctx)
    finally:
        rt.destroy(ctx)


# --------------------------------------------------------------------------- the parser
def test_board_format_fixture_parses_to_its_numbers(board_text):
    t = profile.parse_perf_detail(board_text, source="fixture")
    assert list(t["id"]) == list(range(1, 10))
    assert t.attrs["total_time_us"] == 574 and t.attrs["total_rw_kb"] == 2047
    assert t["time_us"].sum() == t.attrs["total_time_us"]          # the fixture's own totals agree
    assert t["rw_kb"].sum() == t.attrs["total_rw_kb"]
    conv = t.set_index("id").loc[2]
    assert (conv["op"], conv["cycles_ddr"], conv["cycles_npu"], conv["cycles_total"]) == ("ConvRelu", 41200, 88470, 88470)
    assert conv["input_shapes"] == ((1, 3, 256, 256), (24, 3, 3, 3), (24,))
    assert conv["output_shape"] == (1, 24, 128, 128)
    assert conv["mac_usage"] == pytest.approx(8.57) and conv["cores"] == 3
    assert conv["workload"] == "33.3%/33.3%/33.3%"
    swish = t.set_index("id").loc[3]
    assert swish["cores"] == 1 and swish["mac_usage"] == pytest.approx(17.80)
    first, last = t.iloc[0], t.iloc[-1]
    assert first["input_shapes"] == () and first["target"] == "CPU" and math.isnan(first["mac_usage"])
    assert last["output_shape"] == () and last["op"] == "OutputOperator"
    cut = t.set_index("id").loc[7]
    assert cut["input_shapes_cut"] and len(cut["input_shapes"]) == 3
    assert not t.set_index("id").loc[5, "input_shapes_cut"]
    assert t.attrs["source"] == "fixture"


def test_ranking_table_of_the_fixture(board_text):
    r = profile.op_ranking(board_text)
    assert list(r["total_us"]) == sorted(r["total_us"], reverse=True)
    concat = r.set_index("op").loc["Concat"]
    assert concat["calls"] == 2 and concat["total_us"] == 83
    assert r.set_index("op").loc["InputOperator", "cpu_us"] == 9
    assert r["time_ratio"].sum() == pytest.approx(1.0, abs=0.001)


@pytest.mark.parametrize("mask", [abi.RKNN_NPU_CORE_0, abi.RKNN_NPU_CORE_0_1_2])
def test_simulator_text_parses_and_matches_the_report(rt, mask):
    text = _sim_text(rt, "mobilenet_v2", mask)
    t = profile.parse_perf_detail(text)
    layers = models.load_report("mobilenet_v2", "rk3588").layers
    assert len(t) == len(layers)
    assert list(t["id"]) == [layer["id"] + 1 for layer in layers]          # runtime ID = compiler id + 1
    assert list(t["cycles_ddr"]) == [layer["cycles_ddr"] for layer in layers]
    assert list(t["op"]) == [layer["op"] for layer in layers]
    assert t["time_us"].sum() == t.attrs["total_time_us"]
    macs = np.array([layer_macs(layer) for layer in layers])
    assert (np.isnan(t["mac_usage"].to_numpy()) == (macs == 0)).all()       # "\" exactly for layers without MACs
    split = t["op"].map(npu.is_split) & (t["target"] == "NPU")
    want_cores = 3 if mask == abi.RKNN_NPU_CORE_0_1_2 else 1
    assert (t.loc[split, "cores"] == want_cores).all()
    # F2: MacUsage = MACs / (time x 1024 MAC/cycle x 1 GHz), on layers long enough for integer us
    long = (t["time_us"] >= 60) & ~np.isnan(t["mac_usage"])
    expected = macs[long.to_numpy()] / (t.loc[long, "time_us"].to_numpy() * 1e-6 * 1024 * 1e9) * 100
    if mask == abi.RKNN_NPU_CORE_0_1_2:       # a split layer's MACs are shared by its cores
        expected = expected / t.loc[long, "cores"].clip(lower=1).to_numpy()
    np.testing.assert_allclose(t.loc[long, "mac_usage"], expected, rtol=0.02)


@pytest.mark.parametrize("soc, header", [("rk3576", "WorkLoad(0/1)"), ("rk3568", "WorkLoad(0)")])
def test_other_socs_texts_parse(soc, header):
    other = rknnlab.open_runtime("sim", soc)
    try:
        text = _sim_text(other, "mobilenet_v2", soc=soc)
    finally:
        other.close()
    assert header in text
    t = profile.parse_perf_detail(text)
    assert len(t) == len(models.load_report("mobilenet_v2", soc).layers)
    assert (t.loc[t["target"] == "NPU", "cores"] == 1).all()
    assert t["workload"].iloc[1].count("/") == header.count("/")


def test_yolov5s_silu_conv_stays_on_one_core(rt):
    t = profile.parse_perf_detail(_sim_text(rt, "yolov5s", abi.RKNN_NPU_CORE_0_1_2))
    assert (t.loc[t["op"] == "ConvExSwish", "workload"] == "100.0%/0.0%/0.0%").all()
    assert (t.loc[t["op"] == "Concat", "cores"] == 3).all()


def test_perf_table_labels_the_simulator(rt):
    ctx = rt.init(str(models.model_path("digits_cnn", "rk3588")), abi.RKNN_FLAG_COLLECT_PERF_MASK)
    try:
        rt.run(ctx)
        t = profile.perf_table(rt, ctx)
    finally:
        rt.destroy(ctx)
    assert t.attrs["source"].startswith("simulated RK3588") and "modeled" in t.attrs["source"]


@pytest.mark.parametrize("mutate, where", [
    (lambda s: "", "line 1"),
    (lambda s: "   \n\n", "line 1"),
    (lambda s: s.replace("41200/88470/88470", "41200/88470"), "line 7"),
    (lambda s: s.replace("41200/88470/88470       121", "41200/88470/88470       fast"), "line 7"),
    (lambda s: s.replace("(1,24,128,128)    41200", "(1,24,128,128    41200"), "line 7"),
    (lambda s: "\n".join(s.splitlines()[:10]), "line 10"),                   # cut before the totals
    (lambda s: "hello world\n" + s, "line 1"),
    (lambda s: s.replace("MacUsage(%)", "Usage(%)"), "line 4"),
    (lambda s: s.replace("ConvExSwish       1             0", "ConvExSwish       one           0"), "line 23"),
])
def test_bad_text_raises_naming_the_line(board_text, mutate, where):
    with pytest.raises(ValueError, match=where):
        profile.parse_perf_detail(mutate(board_text))


def test_bytes_are_refused_with_a_hint(board_text):
    with pytest.raises(TypeError, match="decode"):
        profile.parse_perf_detail(board_text.encode())


def test_perf_detail_without_the_flag_is_an_error(rt):
    ctx = rt.init(str(models.model_path("digits_cnn", "rk3588")))
    try:
        rt.run(ctx)
        with pytest.raises(Exception):
            profile.perf_detail(rt, ctx)
    finally:
        rt.destroy(ctx)


# --------------------------------------------------------------------------- compiler report
def test_layer_table_columns_from_the_report():
    t = profile.layer_table("mobilenet_v2", "rk3588", bandwidth=2e9)
    layers = models.load_report("mobilenet_v2", "rk3588").layers
    assert len(t) == len(layers) and list(t["runtime_id"]) == list(t["id"] + 1)
    one = t.set_index("id")
    assert one.loc[1, "macs"] == 32 * 112 * 112 * 3 * 3 * 3          # conv 3 -> 32, 3x3
    assert one.loc[2, "macs"] == 32 * 112 * 112 * 3 * 3              # depthwise: weights [1, 32, 3, 3]
    assert one.loc[1, "read_bytes"] == layers[1]["rw_kb"] * 1024
    assert one.loc[1, "read_us_estimate"] == pytest.approx(one.loc[1, "read_bytes"] / 2e9 * 1e6)
    assert one.loc[1, "npu_us"] == pytest.approx(layers[1]["cycles_npu"] / 1e3)
    for _, r in t.iterrows():
        if r["cycles_ddr"] == 0 and r["cycles_npu"] == 0:
            assert r["bound"] == "no cycles"
        else:
            assert r["bound"] == ("DDR" if r["cycles_ddr"] > r["cycles_npu"] else "compute")
    assert set(t["bound"]) >= {"DDR", "compute", "no cycles"}
    assert "compiler report" in t.attrs["source"]


def test_bound_counts_add_up():
    t = profile.layer_table("yolov5s")
    b = profile.bound_counts(t)
    assert b["layers"].sum() == (t["target"] == "NPU").sum()
    assert b["share_of_cycles"].sum() == pytest.approx(1.0)
    assert b.loc["no cycles", "share_of_cycles"] == 0 and b.loc["no cycles", "layers"] > 0


def test_traffic_reads_grow_with_pixels_and_weights_do_not():
    t = profile.traffic(["yolov5s_320", "yolov5s_480", "yolov5s"])
    assert list(t["pixels"]) == [320 * 320, 480 * 480, 640 * 640]
    assert t["weights_and_bias_bytes"].nunique() == 1
    rep = models.load_report("yolov5s", "rk3588")
    assert t.loc["yolov5s", "read_bytes"] == sum(layer["rw_kb"] for layer in rep.layers) * 1024
    assert t.loc["yolov5s", "activation_write_bytes"] == rep.naive_activation_bytes()
    # activation reads scale with the pixels (x4 from 320 to 640), not faster
    ratio = t.loc["yolov5s", "activation_read_bytes"] / t.loc["yolov5s_320", "activation_read_bytes"]
    assert 3.6 < ratio < 4.4
    assert (t["total_bytes"] == t["read_bytes"] + t["activation_write_bytes"]).all()
    # the floor and the estimate price the READS (what the 11.8 B per DDR cycle was fitted on)
    np.testing.assert_allclose(t["read_lower_bound_ms"], t["read_bytes"] / (2 * 2112e6 * 8) * 1e3)
    np.testing.assert_allclose(t["read_estimate_ms"], t["read_bytes"] / 11.8e9 * 1e3)
    assert not {"floor_ms_peak", "floor_ms_effective", "weights_bytes"} & set(t.columns)


def test_weights_and_bias_count_8_bytes_per_output_channel_of_a_conv():
    rep = models.load_report("mobilenet_v2", "rk3588")
    convs = [layer for layer in rep.layers
             if layer["op"].startswith("Conv") and len(layer["input_shapes"]) >= 2
             and len(layer["input_shapes"][1]) == 4]
    weights = sum(int(np.prod(layer["input_shapes"][1])) for layer in convs)
    # per OUTPUT channel: a depthwise conv's weights print as [1, C, kh, kw]
    per_channel = sum(8 * layer["output_shapes"][0][1] for layer in convs)
    assert any(layer["input_shapes"][1][0] == 1 for layer in convs)   # depthwise ones are in
    t = profile.traffic("mobilenet_v2")
    assert t.loc["mobilenet_v2", "weights_and_bias_bytes"] == weights + per_channel
    assert t.loc["mobilenet_v2", "activation_read_bytes"] == pytest.approx(
        t.loc["mobilenet_v2", "read_bytes"] - weights - per_channel)
    # the help text says what RW holds, in the chapter's words, and which total eval_perf's matches
    doc = " ".join((report.__doc__ + profile.traffic.__doc__).split())
    assert "about 8 bytes per output channel" in doc and "bias left out" not in doc
    assert "10,563 KB" in doc and "10,534 KB" in doc
    # ... and the eval_perf total (User Guide) is the read sum, not reads + writes
    kb = t.loc["mobilenet_v2", ["read_bytes", "total_bytes"]].astype(float) / 1024
    assert abs(kb["read_bytes"] - 10563) / 10563 < 0.01 < abs(kb["total_bytes"] - 10563) / 10563


def test_bandwidth_constants_and_their_sources():
    assert profile.DDR_PEAK_BYTES_PER_S == pytest.approx(33.792e9)
    assert report.TRACE_BYTES_PER_DDR_CYCLE == 11.8
    assert profile.READ_RATE_ESTIMATE_BYTES_PER_S == pytest.approx(11.8e9)
    assert not hasattr(profile, "NPU_EFFECTIVE_BYTES_PER_S")
    doc = " ".join(report.__doc__.split())
    assert "quad-channel x16bit" in doc and "2112" in doc and "UNCONFIRMED" in doc and "DERIVED" in doc
    assert "about 11.8 bytes per DDR cycle in a board trace" in doc
    assert "ESTIMATE, not a lower bound" in doc and "about 25 GB/s" in doc
    t = profile.traffic("yolov5s")
    assert t.attrs["read_rate_estimate_bytes_per_s"] == profile.READ_RATE_ESTIMATE_BYTES_PER_S


# --------------------------------------------------------------------------- phases
def test_phases_on_the_simulator(rt):
    t = profile.phases(["digits_cnn", "mobilenet_v2"], frames=3, backend=rt, progress=False)
    assert rt.soc == "rk3588"                                   # a Runtime passed in is left open
    assert list(t["phase"][:6]) == list(profile.PHASES) + ["total"]
    assert (t["frames"] == 3).all() and t["want_float"].all()
    for model, rows in t.groupby("model"):
        rows = rows.set_index("phase")
        per_frame = np.array([rows.loc[p, "ms"] for p in profile.PHASES]).sum(axis=0)
        np.testing.assert_allclose(per_frame, rows.loc["total", "ms"])
        assert (rows["q1_ms"] <= rows["median_ms"] + 1e-12).all() and (rows["median_ms"] <= rows["q3_ms"] + 1e-12).all()
        # rknn_run blocks at least for the modeled time
        assert rows.loc["run", "median_ms"] >= 0.97 * modeled_run_ms(model, "rk3588")
    assert t.set_index(["model", "phase"]).loc[("mobilenet_v2", "run"), "share"] > 0.3
    assert t.set_index("model").loc["mobilenet_v2", "input"].iloc[0] == "224x224"
    assert "simulated RK3588" in t.attrs["source"] and "measured" in t.attrs["source"]
    assert t.attrs["postprocess"]["mobilenet_v2"].startswith("top5")


def test_phases_int8_outputs(rt):
    t = profile.phases("digits_cnn", frames=2, want_float=False, backend=rt, progress=False)
    assert not t["want_float"].any() and (t["median_ms"] > 0).all()


def test_phases_rejects_no_frames(rt):
    with pytest.raises(ValueError):
        profile.phases("digits_cnn", frames=0, backend=rt)


def test_published_phases_are_two_labelled_splits():
    p = profile.published_phases()
    got = p.set_index(["model", "phase"])["median_ms"]
    # rknn_model_zoo#167 measured yolov5s_relu (its logs' heading), not SiLU yolov5s
    assert got[("yolov5s_relu", "inputs_set")] == 14.85 and got[("mobilenet_v2", "run")] == 2.65
    assert "yolov5s" not in set(p["model"])
    # airockchip/librga#69, case (1): model and size not named, RGA steps before inputs_set
    lib = p[p["source"].str.contains("librga#69")].set_index("phase")["median_ms"]
    assert dict(lib) == {"cvtcolor (RGA)": 1.2, "letterbox (RGA)": 2.3, "inputs_set": 0.75, "run": 20.0,
                         "outputs_get": 1.3}
    assert set(p.loc[p["source"].str.contains("librga#69"), "model"]) == {"not named"}
    assert "model not named" in p.loc[p["source"].str.contains("librga#69"), "source"].iloc[0]
    assert (p["note"] == "want_float not stated").all() and p["want_float"].isna().all()
    assert got[("yolov5s_relu", "inputs_set")] / lib["inputs_set"] == pytest.approx(19.8)
    assert "rknn_model_zoo#167" in p.attrs["source"] and "librga#69" in p.attrs["source"]
    assert "not measured here" in p.attrs["source"]
    for _, split in p.groupby(["source", "model"]):
        assert split["share"].sum() == pytest.approx(1.0)


def test_top5_is_softmax_ranked():
    logits = np.array([0.0, 3.0, 1.0, 5.0, 2.0, -1.0, 4.0])
    idx, p = profile.top5(logits)
    assert list(idx) == [3, 6, 1, 4, 2]
    e = np.exp(logits - logits.max())
    np.testing.assert_allclose(p, (e / e.sum())[[3, 6, 1, 4, 2]], rtol=1e-6)


def test_yolov5_decode_finds_a_planted_box():
    classes = 80
    heads = [np.full((1, 3 * (5 + classes), s, s), -10.0, np.float32) for s in (8, 4, 2)]
    t = heads[1].reshape(3, 5 + classes, 4, 4)
    a, y, x = 2, 1, 3                       # anchor 2 of the middle head, cell (1, 3)
    t[a, 0:4, y, x] = 0.0                   # xy -> 0.5, wh -> 0.5
    t[a, 4, y, x] = 10.0                    # objectness
    t[a, 5 + 7, y, x] = 10.0                # class 7
    boxes = profile.yolov5_decode(heads, (64, 64))
    assert boxes.shape == (1, 6)
    stride = 64 / 4
    cx, cy, w, h, score, cls = boxes[0]
    assert (cx, cy) == pytest.approx(((0.5 + x) * stride, (0.5 + y) * stride))
    assert (w, h) == pytest.approx((59, 119))              # (2 x 0.5)^2 x anchor 2 of the head (59, 119)
    assert cls == 7 and score > 0.99


def test_frame_inputs_match_the_model(rt):
    ctx = rt.init(str(models.model_path("mobilenet_v2", "rk3588")))
    try:
        (inp,) = profile.frame_inputs(rt, ctx, seed=1)
        assert inp.size == 224 * 224 * 3 and inp.type == abi.RKNN_TENSOR_UINT8 and inp.fmt == abi.RKNN_TENSOR_NHWC
        rt.inputs_set(ctx, [inp])
    finally:
        rt.destroy(ctx)


# --------------------------------------------------------------------------- CPU costs
def test_layout_round_trip_and_padding():
    rng = np.random.default_rng(3)
    nhwc = rng.integers(-128, 128, (1, 5, 7, 20), dtype=np.int8)
    native = profile.to_nc1hwc2(nhwc, 16)
    assert native.shape == (1, 2, 5, 7, 16)
    assert (native[0, 1, :, :, 4:] == 0).all()                     # channels 20..31 are padding
    assert native[0, 1, 2, 3, 1] == nhwc[0, 2, 3, 17]              # channel 17 = block 1, lane 1
    np.testing.assert_array_equal(profile.nc1hwc2_to_nchw(native, 20), nhwc.transpose(0, 3, 1, 2))


def test_layout_and_dequant_costs_are_measured():
    lay = profile.layout_cost((1, 20, 20, 48), 16, repeats=5)
    assert list(lay["what"]) == ["copy (no conversion)", "NHWC -> NC1HWC2", "NC1HWC2 -> NCHW"]
    assert (lay["kind"] == "measured").all() and (lay["median_us"] > 0).all()
    assert (lay["q1_us"] <= lay["median_us"]).all() and (lay["median_us"] <= lay["q3_us"]).all()
    assert "measured on this machine" in lay.attrs["source"]
    deq = profile.dequant_cost(10_000, zp=3, scale=0.5, repeats=5)
    assert list(deq["bytes_out"]) == [10_000, 40_000]
    np.testing.assert_array_equal(profile.dequantize(np.array([3, 5, -1], np.int8), 3, 0.5), [0.0, 1.0, -2.0])


def test_a_copy_costs_time_in_proportion_to_its_bytes():
    small = profile.copy_cost(64 * 1024, 1, repeats=7)
    big = profile.copy_cost(16 * 2 ** 20, 1, repeats=7)
    assert big["median_us"].iloc[0] > 20 * small["median_us"].iloc[0]   # 256x the bytes


def test_copy_in_pieces_copies_every_byte():
    t = profile.copy_cost(100_000, (1, 10, 1000), repeats=3)
    assert list(t["pieces"]) == [1, 10, 1000] and list(t["bytes"]) == [100_000] * 3
    np.testing.assert_allclose(t["per_piece_ns"] * t["pieces"], t["median_us"] * 1e3)
    with pytest.raises(ValueError):
        profile.copy_cost(10, 11)


def test_sync_cost_is_modeled_and_says_so():
    t = profile.sync_cost([4096, 2 ** 20])
    assert (t["kind"] == "MODELED").all() and "MODELED" in t.attrs["source"]
    assert "zero-copy only" in t.attrs["source"] and "assumptions" in t.attrs["source"]
    one = t.set_index(["nbytes", "mode"])["modeled_us"]
    to_dev = one[(2 ** 20, "RKNN_MEMORY_SYNC_TO_DEVICE")]
    assert to_dev == pytest.approx(cpu.SYNC_FIXED_US + 2 ** 20 / 64 * cpu.SYNC_NS_PER_LINE / 1e3)
    assert one[(2 ** 20, "RKNN_MEMORY_SYNC_BIDIRECTIONAL")] > to_dev > one[(4096, "RKNN_MEMORY_SYNC_TO_DEVICE")]
    with pytest.raises(ValueError):
        profile.sync_cost(4096, modes=[9])


def test_uncached_read_is_the_cached_time_times_twenty_and_labelled():
    t = profile.uncached_read(256 * 1024, repeats=5).set_index("what")
    assert t.loc["cached", "kind"] == "measured" and t.loc["uncached", "kind"] == "MODELED"
    assert t.loc["uncached", "median_us"] == pytest.approx(20 * t.loc["cached", "median_us"])


def test_cpu_costs_for_a_model():
    t = profile.cpu_costs("yolov5s", "rk3588", repeats=3)
    kinds = dict(zip(t["what"], t["kind"]))
    assert kinds["input copied in one piece"] == "measured"
    assert kinds["input copied row by row (640 rows)"] == "measured"
    assert kinds["rknn_mem_sync TO_DEVICE, input (zero-copy only)"] == "MODELED"
    assert kinds["rknn_mem_sync FROM_DEVICE, outputs (zero-copy only)"] == "MODELED"
    assert f"{cpu.SYNC_FIXED_US:g} us per call" in t.attrs["source"]
    assert f"{cpu.SYNC_NS_PER_LINE:g} ns per 64-byte cache line" in t.attrs["source"]
    assert kinds["input read from uncached memory"] == "MODELED"
    assert t.set_index("what").loc["outputs NC1HWC2 -> NCHW", "bytes"] == 16 * 16 * (80 * 80 + 40 * 40 + 20 * 20)  # C1 x C2 = 256 channels per head


# --------------------------------------------------------------------------- fragmentation
def test_fragmentation_with_this_machines_glibc():
    t = profile.fragmentation(seed=1)
    assert t.attrs["source"].startswith("glibc ")
    # small blocks: the freed memory stays in the heap (RSS high) until malloc_trim(0)
    assert profile.retained(t, "small") > 0.8
    small = t[t["pattern"] == "small"].set_index("step")
    grown = small.loc["after malloc", "rss_bytes"] - small.loc["before", "rss_bytes"]
    assert small.loc["after free", "free_kept_bytes"] > 0.8 * grown
    assert small.loc["after malloc_trim(0)", "rss_bytes"] - small.loc["before", "rss_bytes"] < 0.3 * grown
    # mmap-sized blocks: each its own mapping, given back at free
    assert profile.retained(t, "large") < 0.2
    large = t[t["pattern"] == "large"].set_index("step")
    assert large.loc["after malloc", "mmapped_bytes"] - large.loc["before", "mmapped_bytes"] >= 200 * 256 * 1024
    # ... unless a freed large block raised glibc's dynamic mmap threshold first
    assert profile.retained(t, "large_after_free") > 0.8
    assert "IOMMU" in t.attrs["iommu"]


def test_fragmentation_bad_arguments():
    with pytest.raises(ValueError, match="unknown pattern"):
        profile.fragmentation("medium")
    with pytest.raises(ValueError, match="M_MMAP_THRESHOLD"):
        profile.fragmentation("large", large_size=heap.MMAP_THRESHOLD)


# --------------------------------------------------------------------------- multi-core
def test_multicore_speedups_follow_the_op_mix(rt):
    t = profile.multicore(["digits_cnn", "mobilenet_v2", "yolov5s"], runs=6, backend=rt, progress=False)
    s = t.set_index(["model", "mask"])
    ref = s.loc[("mobilenet_v2", "RKNN_NPU_CORE_0")]
    assert ref["verdict"] == "reference" and ref["speedup"] == 1.0 and math.isnan(ref["speedup_low"])
    three = s.loc[("mobilenet_v2", "RKNN_NPU_CORE_0_1_2")]
    assert three["cores"] == 3 and three["speedup_low"] <= three["speedup"] <= three["speedup_high"]
    # the runtime's own account follows the simulator's model exactly
    for model in ("digits_cnn", "mobilenet_v2", "yolov5s"):
        for mask in profile.cores.DEFAULT_MASKS:
            row = s.loc[(model, abi.CORE_MASK_NAMES[mask])]
            assert row["perf_run_ms"] == pytest.approx(row["modeled_ms"], abs=0.002)
    assert s.loc[("mobilenet_v2", "RKNN_NPU_CORE_0_1_2"), "perf_run_ms"] < 0.85 * ref["perf_run_ms"]
    assert s.loc[("digits_cnn", "RKNN_NPU_CORE_0_1_2"), "perf_run_ms"] > s.loc[("digits_cnn", "RKNN_NPU_CORE_0"), "perf_run_ms"]
    assert s.loc[("yolov5s", "RKNN_NPU_CORE_0"), "split_share"] < 0.1 < s.loc[("mobilenet_v2", "RKNN_NPU_CORE_0"), "split_share"]
    assert "simulated RK3588" in t.attrs["source"]


def test_multicore_needs_the_one_core_reference(rt):
    with pytest.raises(ValueError, match="RKNN_NPU_CORE_0"):
        profile.multicore("digits_cnn", masks=(abi.RKNN_NPU_CORE_0_1,), backend=rt)


def test_timing_check_marks_the_calibration_points():
    t = profile.timing_check({("mobilenet_v2", "rk3588"): 450.7, ("yolov5s", "rk3588"): 48.4,
                              ("yolov6n", "rk3562"): 56.4, ("yolov8n", "rk3588"): 70.0})
    s = t.set_index("model")
    assert s.loc["mobilenet_v2", "calibration_point"] and s.loc["yolov6n", "calibration_point"]
    assert s.loc["mobilenet_v2", "ratio"] == pytest.approx(modeled_run_ms("mobilenet_v2", "rk3588") / (1e3 / 450.7))
    assert not s.loc["yolov5s", "calibration_point"]                  # a judge row: never fitted
    assert not s.loc["yolov8n", "calibration_point"], "another FPS than the fitted one is not the fitted row"
    assert s.loc["yolov5s", "ratio"] == pytest.approx(modeled_run_ms("yolov5s", "rk3588") / (1e3 / 48.4))
    assert np.isnan(s.loc["yolov5s", "loo_error"]) and np.isnan(s.loc["yolov8n", "loo_error"])
    # the leave-one-out error is the refit's, not the fit's own residual
    from rknnlab.sim import timing_law
    loo = timing_law.leave_one_out(timing_law.calibration_points())
    assert s.loc["mobilenet_v2", "loo_error"] == pytest.approx(loo[("mobilenet_v2", "rk3588")])
    assert s.loc["yolov6n", "loo_error"] == pytest.approx(loo[("yolov6n", "rk3562")])
    assert abs(s.loc["mobilenet_v2", "loo_error"] - s.loc["mobilenet_v2", "error"]) > 0.05


def test_published_fps_has_the_calibration_and_judge_rows_and_timing_check_uses_them():
    from rknnlab.sim import timing_law
    fps = profile.published_fps()
    calibration = timing_law.calibration_table()
    fitted = {(row["course_model"], soc): v for row in calibration["models"] for soc, v in row["fps"].items()}
    assert len(fitted) == 28 and fitted.items() <= fps.items()
    assert {("yolov5s", "rk3576"): 57.5, ("yolov5s", "rk3568"): 19.3, ("yolov5s", "rk3562"): 23.6,
            ("yolov5s", "rk3588"): 48.4, ("yolov5n", "rk3588"): 82.5, ("yolov5m", "rk3588"): 20.9,
            ("ppocr_det", "rk3588"): 50.7, ("ppocr_det", "rk3576"): 64.3, ("ppocr_det", "rk3568"): 22.1,
            ("ppocr_det", "rk3562"): 28.0}.items() <= fps.items()
    assert len(fps) == 38
    assert not any(m == "resnet50" for m, _ in fps)         # the zoo's resnet50-v2-7 is another network
    assert set(profile.published_fps(["yolov5s"])) == {k for k in fps if k[0] == "yolov5s"}
    with pytest.raises(ValueError, match="no published FPS"):
        profile.published_fps(["nope"])
    t = profile.timing_check().set_index(["model", "soc"])
    assert len(t) == len(fps)
    row = t.loc[("yolov5s", "rk3568")]
    assert row["modeled_ms"] == pytest.approx(modeled_run_ms("yolov5s", "rk3568"))
    assert row["error"] == pytest.approx(modeled_run_ms("yolov5s", "rk3568") * 19.3 / 1e3 - 1)
    # every model has its own report on every SoC: yolov5s_relu off RK3588 is no longer yolov5s
    relu = t.loc[("yolov5s_relu", "rk3576")]
    assert relu["modeled_ms"] == pytest.approx(modeled_run_ms("yolov5s_relu", "rk3576"))
    assert relu["modeled_ms"] < 0.9 * t.loc[("yolov5s", "rk3576"), "modeled_ms"]     # SiLU is slower
    assert "modeled_as" not in t.columns
    assert set(t.index[t["calibration_point"]]) == set(fitted)
    assert t["loo_error"].notna().sum() == 28 and t.loc[t["calibration_point"], "loo_error"].notna().all()
    residual = timing_law.residuals(timing_law.calibration_points())
    assert all(t.loc[key, "error"] == pytest.approx(err) for key, err in residual.items())
    assert "model zoo README" in profile.timing_check().attrs["source"]
    shown = profile.show(profile.timing_check({("yolov5s", "rk3568"): 19.3}), ["error"])
    assert f"{row['error']:+.1%}" in shown.splitlines()[1]                # signed, in percent
    assert "figures as given" in profile.timing_check({("mobilenet_v2", "rk3588"): 450.7}).attrs["source"]
    with pytest.raises(ValueError, match="must be positive"):
        profile.timing_check({("yolov5s", "rk3588"): 0.0})


class _MemSpy:
    """The simulator with the calls a board measurement makes recorded."""

    def __init__(self, rt, fail_init: bool = False):
        self._rt, self.fail_init, self.calls = rt, fail_init, []
        self.backend, self.soc, self.source = "native", rt.soc, "Test Board (RK3588, NPU)"

    def init(self, model, flag=0, extend=None):
        self.calls.append(("init", model))
        if self.fail_init:
            from rknnlab.rknn.errors import RknnError
            raise RknnError(-1, "rknn_init", "no NPU here")
        return self._rt.init(model, flag, extend)

    def create_mem2(self, ctx, size, flags):
        self.calls.append(("create_mem2", ctx, flags))
        return self._rt.create_mem2(ctx, size, flags)

    def destroy_mem(self, ctx, mem):
        self.calls.append(("destroy_mem", ctx))
        return self._rt.destroy_mem(ctx, mem)

    def destroy(self, ctx):
        self.calls.append(("destroy", ctx))
        return self._rt.destroy(ctx)


def test_uncached_read_on_a_board_runtime_measures_both_in_a_real_context(rt):
    # the board path (create_mem2 CACHEABLE / NON_CACHEABLE, read by the CPU), driven through
    # the simulator: both rows are measurements, on buffers of a context it opened, never context 0
    spy = _MemSpy(rt)
    t = profile.uncached_read(64 * 1024, repeats=3, rt=spy)
    assert list(t["what"]) == ["cached", "uncached"] and (t["kind"] == "measured").all()
    assert t.attrs["source"].startswith("Test Board")
    assert spy.calls[0] == ("init", str(models.model_path(cpu.MEM_CONTEXT_MODEL, "rk3588")))
    ctxs = {c[1] for c in spy.calls if c[0] in ("create_mem2", "destroy_mem", "destroy")}
    assert len(ctxs) == 1 and 0 not in ctxs
    assert [c[2] for c in spy.calls if c[0] == "create_mem2"] == [abi.RKNN_FLAG_MEMORY_CACHEABLE,
                                                                   abi.RKNN_FLAG_MEMORY_NON_CACHEABLE]
    assert spy.calls[-1][0] == "destroy"                     # the context does not outlive the measurement


def test_uncached_read_on_a_board_without_a_context_says_unmeasured(rt):
    spy = _MemSpy(rt, fail_init=True)
    t = profile.uncached_read(4096, repeats=3, rt=spy)
    assert (t["kind"] == "unmeasured").all() and t["median_us"].isna().all()
    assert all("no NPU here" in r for r in t["reason"])
    assert not [c for c in spy.calls if c[0] == "create_mem2"]


def test_show_puts_units_in_the_cells_and_the_source_under_them():
    t = profile.traffic("yolov5s")
    text = profile.show(t, ["input", "weights_and_bias_bytes", "read_lower_bound_ms"])
    lines = text.splitlines()
    weights = t.loc["yolov5s", "weights_and_bias_bytes"] / 2 ** 20
    assert f"{weights:,.2f} MiB" in lines[1] and " ms" in lines[1] and "640x640" in lines[1]
    assert lines[-1] == "source: " + t.attrs["source"]
    assert "%" in profile.show(profile.bound_counts(profile.layer_table("yolov5s")))
    with pytest.raises(KeyError, match="no column"):
        profile.show(t, ["nope"])


@pytest.mark.parametrize("ratio, low, high, verdict", [
    (1.25, 1.20, 1.30, "faster"), (0.98, 0.975, 0.985, "slower"),
    (1.004, 1.002, 1.006, "about the same"), (1.0, 0.95, 1.05, "cannot tell apart"),
    (1.3, 0.9, 1.8, "cannot tell apart"),
])
def test_multicore_verdict_rule(ratio, low, high, verdict):
    assert profile.cores._verdict(ratio, low, high) == verdict


class _Rk3566:
    """A runtime that says it is an RK3566 (rknn_query's SoC name on such a board), playing
    the simulator's RK3568 underneath: it records the model files it is given."""

    backend, soc, source = "native", "rk3566", "Test Board (RK3566, NPU)"

    def __init__(self, rt):
        self._rt, self.models = rt, []

    def init(self, model, flag=0, extend=None):
        self.models.append(str(model))
        return self._rt.init(model, flag, extend)

    def __getattr__(self, name):
        return getattr(self._rt, name)


def test_an_rk3566_board_runs_the_rk3568_models():
    sim = rknnlab.open_runtime("sim", "rk3568")
    try:
        board = _Rk3566(sim)
        t = profile.phases("digits_cnn", frames=2, backend=board, progress=False)
        assert board.models == [str(models.model_path("digits_cnn", "rk3568"))]
        assert board.models[0].endswith("rk3568.rknn") and (t["median_ms"] > 0).all()
        m = profile.multicore("digits_cnn", masks=(abi.RKNN_NPU_CORE_0,), runs=2, backend=board,
                              progress=False)
        assert board.models[-1].endswith("rk3568.rknn")
        assert m["modeled_ms"].iloc[0] == pytest.approx(modeled_run_ms("digits_cnn", "rk3568"), rel=0.2)
    finally:
        sim.close()
    assert profile.timing_check({("mobilenet_v2", "rk3566"): 180.7})["modeled_ms"].iloc[0] > 0
    assert profile.traffic("mobilenet_v2", "rk3566")["read_bytes"].iloc[0] == \
        profile.traffic("mobilenet_v2", "rk3568")["read_bytes"].iloc[0]


def test_published_lite_growth_holds_both_runs_of_the_thread() -> None:
    """airockchip/rknn-toolkit2#42 as published: 13,690 calls at 42.43 kB per call, RSS 80.6 ->
    661.5 MB; with gc.collect() every 5 calls 9,733 calls at 0.158 kB, RSS 65-87 MB with no trend."""
    from rknnlab import profile
    growth = profile.published_lite_growth()
    plain, gc5 = growth.loc["inference() only"], growth.loc["gc.collect() every 5 calls"]
    assert (plain["kb_per_call"], plain["calls"], plain["rss"]) == (42.43, 13_690, "80.6 -> 661.5 MB")
    assert (gc5["kb_per_call"], gc5["calls"]) == (0.158, 9_733)
    assert (gc5["rss_low_mb"], gc5["rss_high_mb"]) == (65.0, 87.0)
    assert gc5["rss"] == "65-87 MB, sawtooth, no trend"
    assert round((plain["rss_end_mb"] - plain["rss_start_mb"]) * 1e3 / plain["calls"], 2) == plain["kb_per_call"]
    assert "not simulated" in growth.attrs["source"] and "#42" in growth.attrs["source"]
