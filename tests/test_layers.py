"""rknnlab.layers: the plan's high-water mark, the largest activations, memory counters."""
from __future__ import annotations

import pytest

from rknnlab import layers, models
from rknnlab.models import CompilerReport


def _row(tensor, producer, reader, start, end, shape=(1, 1, 1, 1)):
    return {"layer_id": reader, "user": "Conv", "tensor": tensor, "dtype": "INT8", "fmt": "NC1HWC2",
            "orig_shape": list(shape), "native_shape": list(shape) + [16], "start": start, "end": end,
            "size": end - start, "starred": False, "producer_layer_id": producer}


def _report():
    # a lives over layers 0-1, b over 1-2, c over 2-3 and reuses a's bytes.
    # Live bytes per layer: 100, 150, 130, 80: the peak is layer 1 with a and b.
    rows = [_row("a", 0, 1, 0, 100, (1, 4, 5, 5)), _row("b", 1, 2, 100, 150),
            _row("b", 1, 1, 100, 150), _row("c", 2, 3, 0, 80)]
    data = {"model": "toy", "target": "rk3588", "memory": {"total_weight_size": 10, "total_internal_size": 150},
            "feature_tensors": rows,
            "layers": [{"id": i, "op": op} for i, op in enumerate(("Input", "Conv", "Add", "Output"))]}
    return CompilerReport(data)


def test_live_bytes_count_a_tensor_until_its_last_reader():
    assert layers.live_bytes_per_layer(_report()) == [100, 150, 130, 80]


def test_bytes_shared_by_a_view_count_once():
    # d is a slice of c (a Concat input written into its output): layer 2 holds b and c, and d inside c.
    report = _report()
    report.data["feature_tensors"].append(_row("d", 2, 3, 10, 50))
    assert layers.live_bytes_per_layer(report) == [100, 150, 130, 80]


def test_the_peak_is_the_layer_with_most_live_bytes_and_names_what_is_alive_there():
    peak = layers.alive_at_peak(_report())
    assert (peak.layer, peak.live_bytes) == (1, 150)
    assert [t.tensor for t in peak.tensors] == ["a", "b"]          # largest first
    assert layers.peak_live_bytes(_report()) == 150


def test_plan_summary_compares_the_plan_with_the_naive_sum():
    s = layers.plan_summary(_report())
    assert s["naive (sum of all)"] == 230
    assert s["saved by reuse"] == 80
    assert s["internal / peak"] == 1.0
    assert s["naive / internal"] == round(230 / 150, 2)


def test_largest_activations_are_ranked_by_their_bytes_in_the_plan():
    rows = layers.largest_activations(_report(), n=2)
    assert [(r["tensor"], r["bytes"], r["op"]) for r in rows] == [("a", 100, "Input"), ("c", 80, "Add")]
    assert rows[0]["shape"] == (1, 4, 5, 5)


@pytest.mark.parametrize("name", models.list_models())
def test_every_course_plan_fits_its_internal_buffer(name):
    for soc in models.model_socs(name):
        report = models.load_report(name, soc)
        peak = layers.alive_at_peak(report)
        assert peak.live_bytes <= sum(t.size for t in peak.tensors)
        assert peak.live_bytes <= report.total_internal_size        # a lower bound for any plan
        assert max(t.end for t in report.lifetimes()) == report.total_internal_size


def test_native_attrs_are_the_native_queries_of_every_io_tensor():
    from rknnlab.rknn import abi
    from rknnlab.sim import SimRuntime
    rt = SimRuntime("rk3588")
    ctx = rt.init(str(models.model_path("yolov5s", "rk3588")))
    ins, outs = layers.native_attrs(rt, ctx)
    assert (len(ins), len(outs)) == (1, 3)
    assert [a.index for a in outs] == [0, 1, 2]
    assert all(a.fmt == abi.RKNN_TENSOR_NC1HWC2 for a in outs)       # native, not the plain NCHW
    plain = rt.query(ctx, abi.RKNN_QUERY_OUTPUT_ATTR, abi.rknn_tensor_attr(index=1))
    assert outs[1].size_with_stride > plain.size
    rt.destroy(ctx)


def test_process_memory_sees_a_heap_block_and_touched_pages():
    import mmap
    before = layers.process_memory()
    block = bytearray(16 << 20)                       # 16 MiB from malloc
    area = mmap.mmap(-1, 16 << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)   # fresh private pages ...
    for offset in range(0, len(area), mmap.PAGESIZE):
        area[offset] = 1                              # ... each one touched, so it is resident
    after = layers.process_memory()
    # less 64 KiB: another thread of the process (pytest-xdist's channel to its controller) may free
    # a buffer between the two readings (672 B short once under Python 3.9)
    assert after["heap in use"] - before["heap in use"] >= (16 << 20) - (64 << 10)
    assert after["RssAnon"] - before["RssAnon"] >= 15 << 20
    area.close()
    del block


def test_memfree_changes_reads_the_fall_across_each_action_and_across_nothing(tmp_path):
    # A meminfo file the action rewrites: each repeat takes 1,000 kB more, the undo gives 900 back,
    # and the idle interval sees nothing move. (The real /proc/meminfo is too noisy on a shared
    # machine to test the bookkeeping with; the chapter shows that noise.)
    meminfo = tmp_path / "meminfo"
    free = [50_000]

    def write():
        meminfo.write_text(f"MemTotal: 100000 kB\nMemFree: {free[0]} kB\nMemAvailable: 60000 kB\n")

    def allocate():
        free[0] -= 1_000 + 10 * len(calls)
        calls.append(1)
        write()

        def undo():
            free[0] += 900
            write()
        return undo

    calls = []
    write()
    falls, idle = layers.memfree_changes(allocate, repeats=3, meminfo_path=str(meminfo))
    assert falls.values == (1_000 * 1024, 1_010 * 1024, 1_020 * 1024)
    assert idle.values == (0, 0, 0)
    assert (falls.low, falls.median, falls.high) == (1_000 * 1024, 1_010 * 1024, 1_020 * 1024)


def test_resolves_needs_an_effect_well_outside_the_noise():
    noise = layers.Spread((-3, 1, 2))
    assert layers.Spread((100,)).resolves(100, noise)
    assert not layers.Spread((5,)).resolves(5, noise)


def test_memfree_changes_refuses_zero_repeats():
    with pytest.raises(ValueError, match="repeats"):
        layers.memfree_changes(lambda: (lambda: None), repeats=0)


def test_course_plans_puts_the_weights_beside_each_plan():
    table = layers.course_plans(["digits_cnn", "yolov5s"])
    assert set(table.index.get_level_values("model")) == {"digits_cnn", "yolov5s"}
    for (name, soc), row in table.iterrows():
        report = models.load_report(name, soc)
        assert row["weights"] == report.total_weight_size
        assert row["internal"] == report.total_internal_size == row["total_internal_size"]
        assert row["naive"] == report.naive_activation_bytes() >= row["internal"] >= row["peak alive at one layer"]
    assert table.attrs["toolkits"] == sorted({str(models.load_report(n, s).data["toolkit"]["rknn_toolkit2"])
                                              for n, s in table.index})


def test_the_chapters_charts_draw_one_bar_per_part():
    pytest.importorskip("matplotlib")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    parts = {"m1": {"weights": 3 << 20, "internal": 1 << 20, "io": 1 << 18}, "m2": {"weights": 1 << 20, "internal": 2 << 20, "io": 0}}
    fig = layers.plot_context_memory(parts, "test source")
    ax = fig.axes[0]
    assert len(ax.patches) == 6 and "test source" in ax.get_title(loc="left")
    widths = sorted(round(p.get_width(), 3) for p in ax.patches)
    assert widths == sorted(round(v / 2**20, 3) for part in parts.values() for v in part.values())
    table = layers.course_plans(["digits_cnn", "mobilenet_v2"])
    fig2 = layers.plot_weights_and_activations(table, "rk3588")
    bars = fig2.axes[0].patches
    assert len(bars) == 3 * 2                                      # weights, internal, naive for each model
    heights = sorted(round(b.get_height(), 6) for b in bars)
    on = table.xs("rk3588", level="soc")
    assert heights == sorted(round(v / 2**20, 6) for col in ("weights", "internal", "naive") for v in on[col])
    plt.close("all")
