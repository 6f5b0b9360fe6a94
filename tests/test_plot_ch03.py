"""rknnlab.plot's Chapter 3 figures: each draws the numbers of the table it is given,
names the table's source in its title, and labels its axes."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib", reason="rknnlab.plot needs matplotlib (the lab extra)")
pd = pytest.importorskip("pandas", reason="rknnlab.profile returns pandas DataFrames (the lab extra)")
matplotlib.use("Agg")

from rknnlab import plot, profile  # noqa: E402

FIXTURE = Path(__file__).parent / "fixtures" / "perf_detail_board_format.txt"


@pytest.fixture(autouse=True)
def _close():
    yield
    import matplotlib.pyplot as plt
    plt.close("all")


def _phase_table(model: str, size: str, medians, source: str = "made up for a test"):
    """A table in rknnlab.profile.phases' layout with known medians (ms) per phase."""
    rows = []
    for phase, m in zip(profile.PHASES, medians):
        rows.append({"model": model, "input": size, "want_float": True, "phase": phase, "median_ms": m,
                     "q1_ms": m * 0.9, "q3_ms": m * 1.1, "share": m / sum(medians), "frames": 7, "ms": (m,)})
    total = sum(medians)
    rows.append({"model": model, "input": size, "want_float": True, "phase": "total", "median_ms": total,
                 "q1_ms": total - 1, "q3_ms": total + 2, "share": 1.0, "frames": 7, "ms": (total,)})
    t = pd.DataFrame(rows)
    t.attrs["source"] = source
    return t


def _bar_heights(ax, gid: str):
    return [p.get_height() for c in ax.containers for p in c.patches if c.get_gid() == gid or p.get_gid() == gid]


def _inside_axes(fig, ax, texts) -> bool:
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    box = ax.get_window_extent(r)
    return all(box.x0 <= t.get_window_extent(r).x0 and t.get_window_extent(r).x1 <= box.x1
               and box.y0 <= t.get_window_extent(r).y0 and t.get_window_extent(r).y1 <= box.y1 for t in texts)


def test_frame_phases_labels_a_size_variant_by_its_network_and_size_without_touching():
    df = pd.concat([_phase_table(m, size, [1, 2, 1, 1, 0.1]) for m, size in
                    [("mobilenet_v2", "224x224"), ("mobilenet_v2_320", "320x320"), ("yolov5s_320", "320x320"),
                     ("yolov5s", "640x640")]], ignore_index=True)
    df.attrs["source"] = "made up for a test"
    fig = plot.frame_phases(df, published=profile.published_phases())
    ax = fig.axes[0]
    ticks = [t.get_text() for t in ax.get_xticklabels()]
    assert [t for t in ticks if "want_float" in t] == ["mobilenet_v2\n224x224\nwant_float=1", "mobilenet_v2\n320x320\nwant_float=1",
                         "yolov5s\n320x320\nwant_float=1", "yolov5s\n640x640\nwant_float=1"]
    fig.canvas.draw()
    boxes = [t.get_window_extent(fig.canvas.get_renderer()) for t in ax.get_xticklabels()]
    assert all(a.x1 < b.x0 for a, b in zip(boxes, boxes[1:])), "neighbouring tick labels touch"


def test_frame_phases_stacks_the_medians_and_adds_both_published_splits():
    df = pd.concat([_phase_table("yolov5s_relu", "640x640", [10, 15, 12, 13, 0.5])], ignore_index=True)
    df.attrs["source"] = "made up for a test"
    fig = plot.frame_phases(df, published=profile.published_phases())
    ax = fig.axes[0]
    title = " ".join(ax.get_title(loc="left").split())
    assert "made up for a test" in title and "rknn_model_zoo#167" in title and "librga#69" in title
    assert "published, not measured here" in title and "want_float not stated" in title
    assert "median of 7 frames" in title
    ticks = [t.get_text() for t in ax.get_xticklabels()]
    # the published split of the same network right beside it, the other two at the end
    assert ticks == ["yolov5s_relu\n640x640\nwant_float=1", "yolov5s_relu\n640x640\npublished\nmodel_zoo#167",
                     "mobilenet_v2\n224x224\npublished\nmodel_zoo#167", "(model\nnot named)\npublished\nlibrga#69"]
    run = [p for p in ax.patches if p.get_gid() == "phase:run"]
    assert [p.get_height() for p in run] == pytest.approx([15, 17.49, 2.65, 20.0])
    post = [p for p in ax.patches if p.get_gid() == "phase:postprocess"]
    assert [p.get_height() for p in post] == pytest.approx([13, 0, 0, 0])  # nothing published for it
    assert post[0].get_y() == pytest.approx(10 + 15 + 12)                  # stacked on the phases before it
    rga = [p.get_height() for p in ax.patches if p.get_gid() == "phase:letterbox (RGA)"]
    assert rga == pytest.approx([0, 0, 0, 2.3])
    inputs = [p for p in ax.patches if p.get_gid() == "phase:inputs_set"]
    assert inputs[3].get_y() == pytest.approx(1.2 + 2.3)                   # on top of the RGA steps
    assert "ms" in ax.get_ylabel()
    totals = {t.get_text(): t for t in ax.texts if t.get_gid() == "total"}
    assert set(totals) == {"50.5 ms", f"{14.85 + 17.49 + 1.23:.1f} ms", "4.5 ms", "25.6 ms"}
    # the measured total's label sits above its whisker (q3 = total + 2), not across it
    assert totals["50.5 ms"].xy[1] == pytest.approx(52.5)
    assert ax.get_ylim()[1] > 52.5


def test_frame_phases_whisker_stays_inside_the_axes():
    df = _phase_table("yolov5s", "640x640", [10, 15, 12, 13, 0.5])
    rows = df["phase"] == "total"
    df.loc[rows, "q3_ms"] = 90.0                      # one very slow frame quartile
    fig = plot.frame_phases(df)
    ax = fig.axes[0]
    assert ax.get_ylim()[1] > 90
    assert _inside_axes(fig, ax, [t for t in ax.texts if t.get_gid() == "total"])


def test_frame_phases_of_a_real_simulated_run():
    df = profile.phases("digits_cnn", frames=2, backend="sim", progress=False)
    fig = plot.frame_phases(df)
    ax = fig.axes[0]
    assert "simulated RK3588" in ax.get_title(loc="left")
    run = [p for p in ax.patches if p.get_gid() == "phase:run"]
    assert run[0].get_height() == pytest.approx(df.set_index("phase").loc["run", "median_ms"])


def test_layer_profile_of_the_board_fixture():
    t = profile.parse_perf_detail(FIXTURE.read_text(), source="made-up board")
    fig = plot.layer_profile(t, top=3, title="fixture net")
    left, right = fig.axes[:2]
    assert fig._suptitle.get_text() == "fixture net\nmade-up board"
    names = [tick.get_text() for tick in left.get_yticklabels()]
    assert names == ["3 ConvExSwish", "2 ConvRelu", "7 Concat"]                # the three slowest NPU layers
    assert sorted(p.get_width() for p in left.patches[:3]) == [61, 121, 233]
    t3 = t.set_index("id")
    for patch, tick in zip(left.patches[:3], names):        # the bound as a hatch as well as a colour
        ddr, npu = t3.loc[int(tick.split()[0]), ["cycles_ddr", "cycles_npu"]]
        assert patch.get_hatch() == (".." if ddr == npu == 0 else "//" if ddr > npu else "")
    assert left.get_xlabel() == "time (us)"
    assert right.get_xscale() == "log" and right.get_yscale() == "log"
    assert right.get_xlabel().startswith("NPU cycles") and right.get_ylabel().startswith("DDR cycles")
    # three layers have both cycle counts (drawn), four have 0 NPU cycles (the note)
    drawn = sum(len(c.get_offsets()) for c in right.collections)
    assert drawn == 3
    note = " ".join(t.get_text() for t in right.texts)
    assert "4 layers with 0 DDR or 0 NPU cycles" in note and "Add, Concat, MaxPool" in note


def test_layer_profile_of_a_compiler_report_table():
    t = profile.layer_table("mobilenet_v2")
    fig = plot.layer_profile(t, top=5)
    left = fig.axes[0]
    assert left.get_xlabel() == "NPU time from the cycles (us)"
    assert "compiler report" in fig._suptitle.get_text()
    assert len(left.get_yticklabels()) == 5


def test_traffic_draws_bytes_against_pixels():
    t = profile.traffic(["yolov5s_320", "yolov5s_480", "yolov5s", "mobilenet_v2_160", "mobilenet_v2",
                         "mobilenet_v2_320"])
    fig = plot.traffic(t)
    ax = fig.axes[0]
    lines = {ln.get_label(): ln for ln in ax.get_lines()}
    yolo = lines["yolov5s: read (RW)"]
    np.testing.assert_allclose(yolo.get_xdata(), [102.4, 230.4, 409.6])
    np.testing.assert_allclose(yolo.get_ydata(), t.loc[["yolov5s_320", "yolov5s_480", "yolov5s"], "read_bytes"] / 2 ** 20)
    written = lines["yolov5s: written (estimated)"]                     # an estimate, and says so
    np.testing.assert_allclose(written.get_ydata(), t.loc[["yolov5s_320", "yolov5s_480", "yolov5s"],
                                                          "activation_write_bytes"] / 2 ** 20)
    assert not [k for k in lines if "(activations)" in k]
    np.testing.assert_allclose(lines["mobilenet_v2: of the reads, weights and biases"].get_ydata(),
                               t.loc[["mobilenet_v2_160", "mobilenet_v2", "mobilenet_v2_320"],
                                     "weights_and_bias_bytes"] / 2 ** 20)
    assert "compiler report" in ax.get_title(loc="left")
    assert ax.get_ylabel() == "MiB per frame" and "pixels" in ax.get_xlabel()
    # every size label inside the axes (the 640x640 one was cut at the right edge), none on another
    sizes = [a for a in ax.texts if a.get_gid() == "size"]
    assert sorted(a.get_text() for a in sizes) == sorted(t["input"])
    assert _inside_axes(fig, ax, sizes)
    r = fig.canvas.get_renderer()
    boxes = [a.get_window_extent(r) for a in sizes]
    assert not any(boxes[i].overlaps(boxes[j]) for i in range(len(boxes)) for j in range(i + 1, len(boxes)))
    # the legend is under the axes, not over the lines
    legend = ax.get_legend().get_window_extent(r)
    assert legend.y1 <= ax.get_window_extent(r).y0


def test_multicore_bars_are_the_speedups():
    rows = []
    for model, share, speedups in (("a", 1.0, (1.0, 1.3, 1.6)), ("b", 0.05, (1.0, 0.98, 0.97))):
        for mask, s in zip(("RKNN_NPU_CORE_0", "RKNN_NPU_CORE_0_1", "RKNN_NPU_CORE_0_1_2"), speedups):
            ref = mask == "RKNN_NPU_CORE_0"
            rows.append({"model": model, "mask": mask, "speedup": s,
                         "speedup_low": np.nan if ref else s - 0.05, "speedup_high": np.nan if ref else s + 0.05,
                         "split_share": share})
    df = pd.DataFrame(rows)
    df.attrs["source"] = "made up for a test"
    fig = plot.multicore(df)
    ax = fig.axes[0]
    heights = [p.get_height() for p in ax.patches]
    assert heights == pytest.approx([1.0, 1.0, 1.3, 0.98, 1.6, 0.97])      # mask by mask, model by model
    assert [t.get_text() for t in ax.get_xticklabels()] == ["a\n100% of cycles split", "b\n5% of cycles split"]
    assert "made up for a test" in ax.get_title(loc="left") and "speedup" in ax.get_ylabel()
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["CORE_0", "CORE_0_1", "CORE_0_1_2"]


def test_fragmentation_bars_are_the_rss_changes():
    rows = []
    for pattern, changes in (("small", (40, 40, 3)), ("large", (50, 1, 1))):
        rows.append({"pattern": pattern, "step": "before", "rss_change_bytes": 0})
        for step, mib in zip(("after malloc", "after free", "after malloc_trim(0)"), changes):
            rows.append({"pattern": pattern, "step": step, "rss_change_bytes": mib * 2 ** 20})
    df = pd.DataFrame(rows)
    df.attrs["source"] = "glibc 9.99, made up"
    fig = plot.fragmentation(df)
    ax = fig.axes[0]
    freed = [p.get_height() for p in ax.patches if p.get_gid() == "step:after free"]
    assert freed == pytest.approx([40, 1])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["small", "large"]
    assert "glibc 9.99, made up" in ax.get_title(loc="left") and "MiB" in ax.get_ylabel()


def test_cpu_costs_marks_the_modeled_rows():
    df = pd.DataFrame([
        {"what": "copy", "bytes": 10, "median_us": 50.0, "q1_us": 45.0, "q3_us": 60.0, "kind": "measured"},
        {"what": "sync", "bytes": 10, "median_us": 160.0, "q1_us": np.nan, "q3_us": np.nan, "kind": "MODELED"},
    ])
    df.attrs["source"] = "made up for a test"
    fig = plot.cpu_costs(df)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["copy", "sync (MODELED)"]
    bars = ax.patches[:2]
    assert [b.get_width() for b in bars] == [50.0, 160.0]
    assert bars[0].get_hatch() is None and bars[1].get_hatch() == "//"
    assert "MODELED" in ax.get_title(loc="left") and "made up for a test" in ax.get_title(loc="left")
