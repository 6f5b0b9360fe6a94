"""rknnlab.allocation on the simulator: each table is judged against the models' own sizes
(RKNN_QUERY_MEM_SIZE, the native attrs, the compiler reports) and against what the
runtime does, never against numbers written here."""
from __future__ import annotations

import ctypes
import os

import numpy as np
import pytest

pytest.importorskip("pandas", reason="results need pandas (the lab extra)")
pytest.importorskip("onnxruntime", reason="the simulator needs onnxruntime (the sim extra)")

from rknnlab import allocation, board, models
from rknnlab.allocation import _common
from rknnlab.profile import show
from rknnlab.profile.cpu import UNCACHED_SLOWDOWN, sync_cost
from rknnlab.rknn import abi
from rknnlab.sim import SimRuntime

SHARED = ("mobilenet_v2", "resnet50", "yolov5s")


@pytest.fixture(scope="module")
def rt():
    runtime = SimRuntime("rk3588")
    yield runtime
    runtime.close()


def _sizes(rt, model):
    """(weights, internal, native io bytes) of ``model``, asked of the runtime."""
    ctx = rt.init(_common.model_file(rt, model))
    try:
        m = rt.query(ctx, abi.RKNN_QUERY_MEM_SIZE)
        return int(m.total_weight_size), int(m.total_internal_size), _common.io_bytes(rt, ctx)
    finally:
        rt.destroy(ctx)


# --------------------------------------------------------------------------- preallocation
@pytest.fixture(scope="module")
def prealloc(rt):
    return allocation.prealloc_vs_per_frame("mobilenet_v2", frames=5, rt=rt).set_index("strategy")


def test_prealloc_rows_and_source(prealloc, rt):
    assert list(prealloc.index) == list(allocation.STRATEGIES)
    assert prealloc.attrs["source"].startswith(rt.source)
    assert "source: simulated RK3588" in show(prealloc)


def test_per_frame_mems_show_as_dma_allocated_inside_each_frame(prealloc, rt):
    _, _, io = _sizes(rt, "mobilenet_v2")
    per_frame = prealloc.loc[allocation.STRATEGIES[1]]
    once = prealloc.loc[allocation.STRATEGIES[2]]
    assert per_frame["dma_rise_bytes"] == io          # the io mems, made and destroyed in the frame
    assert once["dma_rise_bytes"] == 0
    assert (prealloc["dma_change_bytes"] == 0).all()  # nothing left behind by any loop
    assert once["calls_per_frame"] < per_frame["calls_per_frame"]


def test_recipe_get_allocates_the_float_output_every_frame(prealloc, rt):
    ctx = rt.init(_common.model_file(rt, "mobilenet_v2"))
    try:
        out = rt.query(ctx, abi.RKNN_QUERY_OUTPUT_ATTR, abi.rknn_tensor_attr(index=0))
    finally:
        rt.destroy(ctx)
    got = prealloc.loc[allocation.STRATEGIES[0], "heap_per_get_bytes"]
    assert out.n_elems * 4 <= got < out.n_elems * 4 + 64     # want_float = 1: n_elems x 4 bytes, one block
    assert np.isnan(prealloc.loc[allocation.STRATEGIES[2], "heap_per_get_bytes"])


def test_prealloc_same_output_tells_the_recipe_apart(prealloc):
    # uint8 pixels in a mem bound with the plain INT8 attr are read as int8 (A13): another output
    assert not prealloc.loc[allocation.STRATEGIES[0], "same_output"]
    assert prealloc.loc[allocation.STRATEGIES[1], "same_output"]
    assert prealloc.loc[allocation.STRATEGIES[2], "same_output"]       # the reference itself


def test_prealloc_table_fits_a_notebook_width(prealloc):
    text = show(prealloc.reset_index(), ["strategy", "median_us", "calls_per_frame", "dma_rise_bytes",
                                         "heap_per_get_bytes", "same_output"])
    assert max(len(line) for line in text.splitlines()[:-1]) <= 100


def test_prealloc_refuses_too_few_frames():
    with pytest.raises(ValueError, match="at least 3"):
        allocation.prealloc_vs_per_frame(frames=2)


# --------------------------------------------------------------------------- shared internal
@pytest.fixture(scope="module")
def shared(rt):
    return allocation.shared_internal(SHARED, rt=rt).set_index("model")


def test_shared_internal_saves_all_but_the_largest_internal(shared, rt):
    internals = [_sizes(rt, m)[1] for m in SHARED]
    assert shared.attrs["max_internal_bytes"] == max(internals)
    assert shared.attrs["saving_bytes"] == sum(internals) - max(internals)
    total = shared.loc["total"]
    assert total["separate_bytes"] - total["shared_internal_bytes"] == sum(internals) - max(internals)


def test_shared_internal_columns_match_the_runtime(shared, rt):
    for m in SHARED:
        weights, internal, io = _sizes(rt, m)
        assert (shared.loc[m, "weights_bytes"], shared.loc[m, "internal_bytes"], shared.loc[m, "io_bytes"]) == \
               (weights, internal, io)
    # with every buffer outside, no model's context holds less than its weights and io mems
    for m in SHARED:
        assert shared.loc[m, "all_outside_bytes"] >= shared.loc[m, "weights_bytes"] + shared.loc[m, "io_bytes"]
    assert shared["same_outputs"].all()


def test_shared_internal_needs_two_models():
    with pytest.raises(ValueError, match="at least two"):
        allocation.shared_internal(["mobilenet_v2"])


class _NotCounting:
    """The simulator, except that its DMA total leaves out the create_mem buffers (what a
    board may do: no document says): the tables must come out the same."""

    def __init__(self, rt):
        self._rt, self._mems = rt, {}

    def __getattr__(self, name):
        return getattr(self._rt, name)

    def create_mem(self, ctx, size):
        mem = self._rt.create_mem(ctx, size)
        self._mems[ctypes.addressof(mem.contents)] = (ctx, size, mem)
        return mem

    def destroy_mem(self, ctx, mem):
        self._mems.pop(ctypes.addressof(mem.contents), None)
        return self._rt.destroy_mem(ctx, mem)

    def query(self, ctx, cmd, info=None):
        got = self._rt.query(ctx, cmd, info)
        if cmd == abi.RKNN_QUERY_MEM_SIZE:
            got.total_dma_allocated_size -= sum(s for c, s, _ in self._mems.values() if c == ctx)
        return got


def test_shared_internal_totals_do_not_depend_on_what_the_dma_total_counts(shared, rt):
    other = allocation.shared_internal(SHARED, rt=_NotCounting(rt)).set_index("model")
    for setup in allocation.SETUPS:
        assert other[f"{setup}_bytes"].tolist() == shared[f"{setup}_bytes"].tolist()   # every row


# --------------------------------------------------------------------------- pipelines
@pytest.fixture(scope="module")
def pipelines(rt):
    return allocation.pipelines_memory("mobilenet_v2", (1, 2, 3), rt=rt)


def _steps(table, how):
    d = table[table["how"] == how].sort_values("n")["dma_bytes"].to_numpy()
    return d[0], np.diff(d)


def test_pipelines_each_way_adds_what_it_does_not_share(pipelines, rt):
    weights, internal, _ = _sizes(rt, "mobilenet_v2")
    one, init_steps = _steps(pipelines, "rknn_init each")
    _, dup_steps = _steps(pipelines, "rknn_dup_context")
    _, shared_steps = _steps(pipelines, "rknn_init each + one internal mem")
    _, both_steps = _steps(pipelines, "rknn_dup_context + one internal mem")
    assert (init_steps == one).all()
    assert (dup_steps == one - weights).all()
    assert (shared_steps == one - internal).all()
    assert (both_steps == one - weights - internal).all()
    assert (pipelines.groupby("how")["dma_bytes"].min() == one).all()   # one pipeline: the same four ways


def test_pipelines_sharing_internal_memory_cannot_run_at_once(pipelines):
    assert (pipelines["run_at_once"] == ~pipelines["how"].str.endswith("internal mem")).all()


# --------------------------------------------------------------------------- parallel runs
PAIR = ("mobilenet_v2", "resnet50")    # resnet50 runs longer: it starts first


@pytest.fixture(scope="module")
def corruption(rt):
    return allocation.parallel_corruption(PAIR, repeats=2, rt=rt)


def _at_once(table):
    return table[table["mode"] == "at the same time"].set_index("model")


def test_sequential_runs_on_a_shared_internal_mem_are_correct(corruption):
    seq = corruption[corruption["mode"] == "one after another"]
    assert len(seq) == 2 and (seq["runs"] == 2).all() and (seq["correct_runs"] == seq["runs"]).all()
    assert (seq["overlap_ms"] == 0).all() and (seq["mismatch_share"] == 0).all()


def test_runs_at_the_same_time_really_overlap(corruption, rt):
    both = _at_once(corruption)
    assert (both["runs"] == 2).all(), f"{corruption.attrs['attempts']} attempts made only {both['runs'].min()} overlaps"
    assert corruption.attrs["attempts"] == 2 + corruption.attrs["retried"]
    assert both.loc["resnet50", "started"] == "first, core 0"
    assert both.loc["mobilenet_v2", "started"] == "second, core 1"
    shorter = _perf_run_us(rt, "mobilenet_v2")
    assert (both["overlap_ms"] * 1e3 >= 0.9 * shorter).all()   # the shorter run lies inside the longer one
    wrong = int((both["runs"] - both["correct_runs"]).sum())
    verdict = corruption.attrs["verdict"]
    assert verdict.startswith("corrupted") if wrong else verdict.startswith("no wrong output")


def _perf_run_us(rt, model):
    ctx = rt.init(_common.model_file(rt, model))
    try:
        io = _common.BoundIo.bind(rt, ctx)
        io.write_inputs(1)
        rt.run(ctx)
        io.destroy()
        return int(rt.query(ctx, abi.RKNN_QUERY_PERF_RUN).run_duration)
    finally:
        rt.destroy(ctx)


def _models_overlapping_runs() -> bool:
    """Whether the simulator models runs that overlap on a shared internal mem (A28)."""
    from rknnlab.sim import ASSUMPTIONS
    return any(a[0] == "A28" and "intermediate state in the internal buffer" in a[1] for a in ASSUMPTIONS)


def test_runs_at_the_same_time_on_a_shared_internal_mem_go_wrong(corruption):
    if not _models_overlapping_runs():
        pytest.skip("the simulator does not model overlapping runs on a shared internal mem yet")
    both = _at_once(corruption)
    # the shorter run wrote over the buffer while the longer one was using it: the longer one
    # is wrong every time, the shorter one (done before the longer one touched it again) right
    assert both.loc["resnet50", "correct_runs"] == 0
    assert both.loc["mobilenet_v2", "correct_runs"] == both.loc["mobilenet_v2", "runs"]
    # not a stray byte: the wrong outputs differ from the right ones in at least half as many
    # bytes as the outputs of another real input do
    wrong = both.loc["resnet50"]
    assert 0 < wrong["other_input_share"] <= 1
    assert wrong["mismatch_share"] >= 0.5 * wrong["other_input_share"]
    assert corruption.attrs["verdict"].startswith("corrupted: 2 of 4 outputs")


def test_parallel_corruption_gives_the_same_table_every_time(corruption, rt):
    again = allocation.parallel_corruption(PAIR, repeats=2, rt=rt)
    columns = ["mode", "model", "started", "runs", "correct_runs", "mismatch_share", "other_input_share"]
    assert again[columns].equals(corruption[columns])
    assert again.attrs["verdict"] == corruption.attrs["verdict"]


def test_parallel_corruption_cannot_tell_on_one_npu_core():
    one_core = SimRuntime("rk3568")     # runs queue on its single core: they never overlap
    try:
        table = allocation.parallel_corruption(("mobilenet_v2", "yolov5s"), repeats=1, rt=one_core)
    finally:
        one_core.close()
    both = _at_once(table)
    assert (both["runs"] == 0).all() and both["mismatch_share"].isna().all()
    assert table.attrs["attempts"] == table.attrs["retried"] == allocation.ATTEMPTS_PER_RUN
    assert table.attrs["verdict"].startswith("cannot tell: the runs at the same time never overlapped")


def test_corruption_verdict_says_when_it_cannot_tell(corruption):
    never = corruption.copy()
    never["overlap_ms"] = 0.0
    assert allocation.corruption_verdict(never).startswith("cannot tell: the runs at the same time never")
    broken = corruption.copy()
    broken.loc[broken["mode"] == "one after another", "correct_runs"] = 0
    assert allocation.corruption_verdict(broken).startswith("cannot tell: runs one after another")


# --------------------------------------------------------------------------- IOMMU budget
def test_iommu_budget_adds_page_rounded_buffers():
    table = allocation.iommu_budget(["yolov5s", "mobilenet_v2"], [3, 5])
    report = models.load_report("mobilenet_v2", "rk3588")
    page = lambda n: -(-n // 4096) * 4096
    io = sum(page(a["size_with_stride"]) for k in ("inputs", "outputs") for a in report.attrs(k, "native"))
    row = table.set_index("model").loc["mobilenet_v2"]
    assert row["first_bytes"] == page(report.total_weight_size) + page(report.total_internal_size) + io
    assert row["total_bytes"] == 5 * row["first_bytes"]
    assert table["cumulative_bytes"].tolist() == table["total_bytes"].cumsum().tolist()
    assert row["max_count"] * row["first_bytes"] <= 2 ** 32 < (row["max_count"] + 1) * row["first_bytes"]


def test_iommu_budget_says_when_the_domain_is_full():
    per = allocation.iommu_budget(["resnet50"], 1)["first_bytes"].iloc[0]
    n = int(2 ** 32 // per)
    assert allocation.iommu_budget(["resnet50"], n)["fits"].iloc[0]
    assert not allocation.iommu_budget(["resnet50"], n + 1)["fits"].iloc[0]


def test_iommu_budget_with_dup_context_shares_the_weights():
    alone = allocation.iommu_budget(["yolov5s"], 4).iloc[0]
    dup = allocation.iommu_budget(["yolov5s"], 4, share_weights=True).iloc[0]
    assert dup["first_bytes"] == alone["first_bytes"]
    assert dup["more_bytes"] == alone["more_bytes"] - alone["weights_bytes"]


@pytest.mark.parametrize("share_weights", [False, True])
def test_iommu_budget_sums_a_mix_and_counts_the_copies_that_fit(share_weights):
    mix, counts = ["yolov5m", "resnet50"], [2, 3]
    table = allocation.iommu_budget(mix, counts, share_weights=share_weights)
    assert table.attrs["total_bytes"] == table["cumulative_bytes"].iloc[-1] == table["total_bytes"].sum()
    assert table.attrs["domain_share"] == table.attrs["total_bytes"] / 2 ** 32
    n = table.attrs["max_mixes"]
    assert n >= 1
    fits = lambda k: allocation.iommu_budget(mix, [k * c for c in counts], share_weights=share_weights)["fits"].iloc[-1]
    assert fits(n) and not fits(n + 1)


def test_iommu_budget_refuses_mismatched_counts():
    with pytest.raises(ValueError, match="one count"):
        allocation.iommu_budget(["yolov5s", "resnet50"], [1])


# --------------------------------------------------------------------------- cache choice
def test_cache_choice_rows_follow_their_model():
    table = allocation.cache_choice(64 * 1024, repeats=5).set_index("memory")
    cached, uncached = table.loc["CACHEABLE"], table.loc["NON_CACHEABLE"]
    assert uncached["read_us"] == pytest.approx(cached["read_us"] * UNCACHED_SLOWDOWN)
    assert cached["sync_us"] == pytest.approx(
        sync_cost(64 * 1024, (abi.RKNN_MEMORY_SYNC_FROM_DEVICE,))["modeled_us"].iloc[0])
    assert uncached["sync_us"] == 0
    for _, r in table.iterrows():
        assert r["total_us"] == pytest.approx(r["read_us"] + r["sync_us"])
        assert r["total_q1_us"] <= r["total_us"] <= r["total_q3_us"]


def test_cache_choice_verdict_agrees_with_its_rows():
    for args in ({"nbytes": 16 * 2 ** 20}, {"nbytes": 4096, "read_share": 0.01}):
        table = allocation.cache_choice(repeats=5, **args)
        verdict = table.attrs["verdict"]
        a, b = table.set_index("memory")[["total_q1_us", "total_q3_us", "total_us"]].to_numpy()
        if a[1] >= b[0] and b[1] >= a[0]:
            assert verdict.startswith("cannot tell")
        else:
            cheaper = "CACHEABLE" if a[2] < b[2] else "NON_CACHEABLE"
            assert verdict.startswith(f"{cheaper} is cheaper")
    # reading a whole 16 MiB buffer: the modeled 20x uncached read outweighs one sync by far
    assert allocation.cache_choice(16 * 2 ** 20, repeats=5).attrs["verdict"].startswith("CACHEABLE")


def test_cache_choice_never_read_has_no_cpu_cost_and_no_ratio():
    verdict = allocation.cache_choice(64 * 1024, reads_per_frame=0, repeats=3).attrs["verdict"]
    assert verdict.startswith("NON_CACHEABLE is cheaper: 0.0 us") and verdict.endswith("(no CPU cost)")
    assert "x)" not in verdict


def test_cache_choices_is_one_table_with_each_pattern_verdict():
    patterns = {"big, read twice": dict(nbytes=4 * 2 ** 20, reads_per_frame=2),
                "small, never read": dict(nbytes=4096, reads_per_frame=0)}
    table = allocation.cache_choices(patterns, repeats=3)
    assert table["pattern"].tolist() == [p for p in patterns for _ in range(2)]
    assert table["memory"].tolist() == ["CACHEABLE", "NON_CACHEABLE"] * 2
    for label, rows in table.groupby("pattern", sort=False):
        verdict = table.attrs["verdicts"][label]
        cheaper = rows["cheaper"].unique()
        assert len(cheaper) == 1                                   # the pattern's verdict on both rows
        if verdict.startswith("cannot tell"):
            assert cheaper[0] == "cannot tell"
        else:
            best = rows.loc[rows["total_us"].idxmin(), "memory"]
            assert verdict.startswith(best) and cheaper[0].startswith(f"{best} (")
    assert table.attrs["verdicts"]["small, never read"].endswith("(no CPU cost)")
    assert table[table["pattern"] == "small, never read"]["cheaper"].iloc[0] == "NON_CACHEABLE (no CPU cost)"
    assert table.attrs["source"] == allocation.cache_choice(4096, repeats=3).attrs["source"]
    with pytest.raises(ValueError, match="at least one"):
        allocation.cache_choices({})


def test_cache_choice_refuses_bad_patterns():
    with pytest.raises(ValueError):
        allocation.cache_choice(1000, read_share=0)


# --------------------------------------------------------------------------- SRAM
#: a table in the runtime's RKNN_LOG_LEVEL=3 format with made-up rows
LOG = """\
---------------------------------------------------------------------------
Total allocated Internal SRAM Size: 8192, Addr: [0xff3e0000, 0xff3e2000)
---------------------------------------------------------------------------
ID  User     Tensor   DataType OrigShape     NativeShape      |     [Start       End)       Size |    SramHit
1   Conv     input0   INT8     (1,3,8,8)     (1,1,8,8,3)      | 0xff000000 0xff0000c0 0x000000c0 | \\
2   ConvRelu out2     INT8     (1,16,8,8)    (1,1,8,8,16)     | 0xff3e0000 0xff3e0400 0x00000400 | 0x00000400
3   ConvRelu out3     INT8     (1,64,32,32)  (1,4,32,32,16)   | 0xff3e0400*0xff3f0400 0x00010000 | 0x00001c00
4   Conv     out4     INT8     (1,64,32,32)  (1,4,32,32,16)   | 0xff3f0400 0xff400400 0x00010000 | 0x00000000
----------------------------------------
Total Weight Memory Size: 1000
Total Internal Memory Size: 135168
Predict Internal Memory RW Amount: 5000
Predict Weight Memory RW Amount: 1000
Predict SRAM Hit RW Amount: 16384
----------------------------------------
"""


def test_sram_hits_parses_the_table():
    t = allocation.sram_hits(LOG)
    assert t["id"].tolist() == [1, 2, 3, 4]
    assert t["sram_hit_bytes"].tolist()[1:] == [0x400, 0x1c00, 0]
    assert np.isnan(t["sram_hit_bytes"].iloc[0]) and not t["in_sram"].iloc[0]
    assert t["in_sram"].tolist()[1:] == [True, True, False]
    assert t["native_shape"].iloc[2] == (1, 4, 32, 32, 16)
    assert t["size_bytes"].iloc[2] == t["end"].iloc[2] - t["start"].iloc[2] == 0x10000
    assert t.attrs["sram_bytes"] == 8192 and t.attrs["hit_bytes"] == 0x2000
    assert t.attrs["predict_sram_hit_rw_bytes"] == 2 * t.attrs["hit_bytes"]
    assert t.attrs["total_internal_bytes"] == 135168


def test_sram_hits_refuses_text_without_a_table():
    with pytest.raises(ValueError, match="RKNN_LOG_LEVEL=3"):
        allocation.sram_hits("I RKNN: rknn_init done\n")


def test_sram_fit_budget_models_the_overlap_with_the_first_pages(rt):
    report = models.load_report("mobilenet_v2", "rk3588")
    budget = allocation.RK3588_SRAM_BYTES
    t = allocation.sram_fit("mobilenet_v2", budget=budget + 100, rt=rt)   # whole pages only
    assert t.attrs["sram_bytes"] == budget
    io = {a["name"] for k in ("inputs", "outputs") for a in report.attrs(k)}
    for (_, row), ft in zip(t.iterrows(), report.data["feature_tensors"]):
        if ft["tensor"] in io:      # in io buffers of their own, never in the internal plan's SRAM part
            assert np.isnan(row["sram_hit_bytes"]) and not row["in_sram"]
        else:
            assert row["sram_hit_bytes"] == max(0, min(ft["end"], budget) - ft["start"])
    assert t["sram_hit_bytes"].isna().sum() == sum(ft["tensor"] in io for ft in report.data["feature_tensors"]) > 0
    assert t.attrs["predict_sram_hit_rw_bytes"] == 2 * t["sram_hit_bytes"].sum()
    none = allocation.sram_fit("mobilenet_v2", budget=4095, rt=rt)
    assert none.attrs["hit_bytes"] == 0 and not none["in_sram"].any()
    everything = allocation.sram_fit("mobilenet_v2", budget=report.total_internal_size, rt=rt)
    inside = everything["sram_hit_bytes"].notna()
    assert (everything.loc[inside, "sram_hit_bytes"] == everything.loc[inside, "size_bytes"]).all()
    assert "MODELED" in t.attrs["source"]


BITMAP = ('SRAM bitmap: "*" - used, "." - free (1bit = 4KB)\n[000] [********........]\n'
          "[001] [....]\nSRAM total size: 81920, used: 32768, free: 49152\n")


def test_parse_sram_bitmap():
    got = allocation.parse_sram_bitmap(BITMAP)
    assert got == {"total_bytes": 81920, "used_bytes": 32768, "free_bytes": 49152, "pages": 20, "used_pages": 8}
    with pytest.raises(ValueError, match="SRAM bitmap"):
        allocation.parse_sram_bitmap("nothing here")


def test_board_reads_the_sram_bitmap(tmp_path):
    path = tmp_path / board.SRAM_BITMAP.lstrip("/")
    assert board.read_sram_bitmap(str(tmp_path)) == (None, board.MISSING)
    path.parent.mkdir(parents=True)
    path.write_text(BITMAP)
    assert board.read_sram_bitmap(str(tmp_path)) == (BITMAP, None)
    if os.geteuid() != 0:      # root reads anything: the refusal shows for other users only
        path.chmod(0)
        assert board.read_sram_bitmap(str(tmp_path)) == (None, board.NEEDS_ROOT)


def _has_sram(rt) -> bool:
    return hasattr(rt, "sram_log") and hasattr(rt, "sram_bitmap")


def test_sram_fit_measured_matches_the_model_on_the_simulator(rt):
    if not _has_sram(rt):
        pytest.skip("the simulator does not model SRAM yet")
    free = allocation.sram_usage(rt)["free_bytes"].iloc[0]
    measured = allocation.sram_fit("mobilenet_v2", rt=rt)
    modeled = allocation.sram_fit("mobilenet_v2", budget=int(free), rt=rt)
    assert measured["sram_hit_bytes"].fillna(-1).tolist() == modeled["sram_hit_bytes"].fillna(-1).tolist()
    assert measured.attrs["hit_bytes"] == modeled.attrs["hit_bytes"] > 0
    assert measured.attrs["predict_sram_hit_rw_bytes"] == 2 * measured.attrs["hit_bytes"]


def test_sram_usage_on_the_simulator_sees_a_context_take_sram(rt):
    if not _has_sram(rt):
        pytest.skip("the simulator does not model SRAM yet")
    before = allocation.sram_usage(rt).iloc[0]
    ctx = rt.init(_common.model_file(rt, "mobilenet_v2"), flag=abi.RKNN_FLAG_ENABLE_SRAM)
    try:
        during = allocation.sram_usage(rt).iloc[0]
    finally:
        rt.destroy(ctx)
    after = allocation.sram_usage(rt).iloc[0]
    assert during["used_bytes"] > before["used_bytes"] == after["used_bytes"]
    assert during["used_pages"] * 4096 == during["used_bytes"]


# --------------------------------------------------------------------------- dynamic shapes
def _dynamic(rt) -> bool:
    try:
        ctx = rt.init(_common.model_file(rt, "mobilenet_v2_dynamic"))
    except Exception:
        return False
    try:
        allocation.input_shapes(rt, ctx)
        return True
    except Exception:
        return False
    finally:
        rt.destroy(ctx)


def test_shape_sweep_allocates_the_largest_once(rt):
    if not _dynamic(rt):
        pytest.skip("the simulator does not answer dynamic shapes yet")
    t = allocation.shape_sweep(frames=2, rt=rt)
    assert len(t) >= 2
    assert (t["io_mem_bytes"] == t["input_bytes"].max() + t["output_bytes"].max()).all()   # allocated once
    pixels = [int(s.split("x")[-1]) * int(s.split("x")[-2]) for s in t["shape"]]
    order = np.argsort(pixels)
    assert np.all(np.diff(t["input_bytes"].to_numpy()[order]) > 0)
    assert np.all(np.diff(t["npu_us"].to_numpy()[order]) > 0)


def test_try_alloc_sram_spills_the_rest_to_ddr(rt):
    if not _has_sram(rt):
        pytest.skip("the simulator does not model SRAM yet")
    total = allocation.sram_usage(rt)["free_bytes"].iloc[0]
    sizes = (total // 2, total // 2 + 4096, 64 * 1024)      # the second no longer fits whole
    t = allocation.try_alloc_sram(sizes, rt=rt)
    assert t["sram_bytes"].sum() == total - t["free_sram_bytes"].iloc[-1] <= total
    first, second, third = t.to_dict("records")
    assert first["sram_bytes"] >= first["requested_bytes"] and first["dma_rise_bytes"] == 0
    assert 0 < second["sram_bytes"] < second["requested_bytes"] <= second["sram_bytes"] + second["dma_rise_bytes"]
    assert third["sram_bytes"] == 0 and third["dma_rise_bytes"] >= third["requested_bytes"]
    assert allocation.sram_usage(rt)["free_bytes"].iloc[0] == total        # destroy_mem gave it back


def test_sram_effect_takes_sram_and_saves_time(rt):
    if not _has_sram(rt):
        pytest.skip("the simulator does not model SRAM yet")
    # yolov5n: its 0-cycle layers (Add, Concat, Resize, ...) move bytes that SRAM serves (A54);
    # mobilenet_v2 has none, and saves nothing (chapter 5 §7)
    t = allocation.sram_effect("yolov5n", frames=2, rt=rt).set_index("flag")
    plain, sram = t.loc["0"], t.loc["RKNN_FLAG_ENABLE_SRAM"]
    assert plain["sram_bytes"] == 0 < sram["sram_bytes"] <= allocation.RK3588_SRAM_BYTES
    assert sram["dma_bytes"] < plain["dma_bytes"]
    assert sram["npu_us"] < plain["npu_us"]
    assert t.attrs["verdict"].startswith("ENABLE_SRAM saves")


# --------------------------------------------------------------------------- a board's runtime
#: the C double of librknnrt.so knows one fake model, given by these bytes (lib/rknnlab/c/rknn_double.c)
FAKE_MODEL = b"RKNN" + b"fake model for tests"


@pytest.fixture
def native(rknn_double_path, tmp_path):
    from rknnlab.rknn.native import NativeRuntime
    path = tmp_path / "fake.rknn"
    path.write_bytes(FAKE_MODEL)
    return NativeRuntime(rknn_double_path), str(path)


def test_tables_come_from_a_native_runtime_too(native):
    rt, path = native
    loops = allocation.prealloc_vs_per_frame(path, frames=3, rt=rt)
    assert loops.attrs["source"].startswith(rt.source) and "simulated" not in loops.attrs["source"]
    pipes = allocation.pipelines_memory(path, (1, 2), rt=rt).set_index(["how", "n"])["dma_bytes"]
    assert pipes[("rknn_dup_context", 2)] < pipes[("rknn_init each", 2)] == 2 * pipes[("rknn_init each", 1)]
    shared = allocation.shared_internal([path, path], rt=rt).set_index("model")
    internal = int(shared["internal_bytes"].iloc[0])
    # the double does not count create_mem buffers in its DMA total: the ledger adds them
    assert shared.loc["total", "separate_bytes"] - shared.loc["total", "shared_internal_bytes"] == internal
    assert shared.loc["total", "all_outside_bytes"] >= shared.loc["total", "weights_bytes"]


def test_sram_usage_on_a_board_says_it_needs_root(native, monkeypatch):
    rt, _ = native
    monkeypatch.setattr(board, "read_sram_bitmap", lambda root="/": (None, board.NEEDS_ROOT))
    with pytest.raises(PermissionError, match="sudo cat /sys/kernel/debug/rknpu/mm"):
        allocation.sram_usage(rt)
    monkeypatch.setattr(board, "read_sram_bitmap", lambda root="/": (BITMAP, None))
    assert allocation.sram_usage(rt)["used_bytes"].iloc[0] == 32768


def test_show_sram_prints_a_few_rows_and_the_totals():
    t = allocation.sram_hits(LOG)
    text = allocation.show_sram(t, rows=2)
    lines = text.splitlines()
    assert len(lines) == 1 + 2 + 3                  # header, two rows, "more", totals, source
    assert lines[3] == "... 2 more rows"
    assert "SRAM 8.0 KiB" in lines[4] and "SramHit summed over 3 rows: 8.0 KiB" in lines[4]
    assert "saved per frame: 16.0 KiB" in lines[4]
    assert lines[-1] == "source: RKNN_LOG_LEVEL=3 log"
    assert "out3" not in text                       # long tensor names stay out


# --------------------------------------------------------------------------- printed tables
def test_show_wraps_the_source_line_between_words():
    import pandas as pd
    words = [f"word{i}" for i in range(60)] + ["rknn-toolkit2", "q1-q3", "https://example.org/" + "x" * 120]
    table = pd.DataFrame({"n": [1]})
    table.attrs["source"] = " ".join(words)
    lines = show(table).splitlines()[2:]            # after the header and the one row
    assert lines[0].startswith("source: word0 ")
    assert all(len(line) <= 100 for line in lines if not line.startswith("https://"))
    assert " ".join(lines) == "source: " + " ".join(words)     # no word split, none lost
    assert len(lines) >= 5


# --------------------------------------------------------------------------- RKNNLite objects against dup
def test_lite_objects_hold_the_weights_and_the_model_bytes_once_per_object(rt):
    """N RKNNLite objects (one per core) against rknn_init + N - 1 dup_context: the DMA
    differs by N - 1 weight buffers, Python holds the file N times, and the heap holds the
    model twice per object (A65) against once for the C path (A4)."""
    n = 3
    table = allocation.lite_vs_dup("mobilenet_v2", n=n, rt=rt)
    lite, dup = table.iloc[0], table.iloc[1]
    assert list(table["way"]) == [f"{n} RKNNLite objects", f"1 rknn_init + {n - 1} rknn_dup_context"]
    file_bytes, weights = table.attrs["file_bytes"], table.attrs["weights_bytes"]
    assert file_bytes == os.path.getsize(_common.model_file(rt, "mobilenet_v2"))
    w, i, io = _sizes(rt, "mobilenet_v2")
    assert weights == w
    assert dup["dma_bytes"] == w + n * (i + io), "dup shares the weights; each context its internal and io"
    assert lite["dma_bytes"] == n * (w + i + io), "each RKNNLite object is a context of its own"
    assert lite["python_model_bytes"] == n * file_bytes and dup["python_model_bytes"] == 0
    assert lite["heap_rise_bytes"] - dup["heap_rise_bytes"] >= 0.95 * (2 * n - 1) * file_bytes
    assert dup["heap_rise_bytes"] < 2 * file_bytes
    assert table.attrs["masks"] == ["NPU_CORE_0", "NPU_CORE_1", "NPU_CORE_2"]
    assert all(line.startswith("W ") for line in table.attrs["log"]), "no E line: every call succeeded"
    assert "simulated RK3588" in table.attrs["source"]


def test_lite_objects_on_a_one_core_soc_use_no_core_mask():
    one_core = SimRuntime("rk3568")
    try:
        table = allocation.lite_vs_dup("digits_cnn", n=2, rt=one_core)
    finally:
        one_core.close()
    assert table.attrs["masks"] == ["NPU_CORE_AUTO", "NPU_CORE_AUTO"]
    assert not any("core_mask" in line for line in table.attrs["log"]), table.attrs["log"]
    assert table["dma_bytes"].iloc[0] > table["dma_bytes"].iloc[1]


def test_lite_vs_dup_refuses_no_pipelines(rt):
    with pytest.raises(ValueError, match="n=0"):
        allocation.lite_vs_dup("mobilenet_v2", n=0, rt=rt)
