"""rknnlab.review.claims on the simulator: every verdict is judged against what the runtime
itself reports (RKNN_QUERY_MEM_SIZE, the output attrs, the compiler's SRAM budget) or
against the numbers the same result carries, never against a speed-up written here (the
simulator's timing law will be re-fitted)."""
from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

pytest.importorskip("pandas", reason="results need pandas (the lab extra)")
pytest.importorskip("onnxruntime", reason="the simulator needs onnxruntime (the sim extra)")

from rknnlab.allocation import RK3588_SRAM_BYTES
from rknnlab.allocation._common import io_bytes, mem_size, model_file
from rknnlab.experiment.variants import query_io
from rknnlab.profile.cores import MIN_CHANGE
from rknnlab.review import claims
from rknnlab.sim import SimRuntime

CHAPTERS = Path(__file__).resolve().parents[1] / "chapters"


@pytest.fixture(scope="module", autouse=True)
def simulated_rk3588():
    """The claims run on the simulated RK3588 whatever this machine's environment says."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RKNNLAB_BACKEND", "sim")
        mp.setenv("RKNNLAB_SIM_SOC", "rk3588")
        yield


@pytest.fixture(scope="module")
def results():
    """Each claim measured once (the module's tests judge the same run)."""
    return {
        "pointer_reuse": claims.pointer_reuse(frames=30, backend="sim"),
        "skip_release": claims.skip_release(frames=150, backend="sim"),
        "who_allocates": claims.who_allocates(backend="sim"),
        "npu_memory_in_ram": claims.npu_memory_in_ram(backend="sim"),
        "core_masks": claims.core_masks(runs=10, backend="sim"),
        "want_float_cost": claims.want_float_cost(backend="sim"),
        "max_once": claims.max_once(backend="sim"),
        "sram_default": claims.sram_default(backend="sim"),
    }


@pytest.fixture(scope="module")
def rt():
    runtime = SimRuntime("rk3588")
    yield runtime
    runtime.close()


def _sizes(rt, model):
    ctx = rt.init(model_file(rt, model))
    try:
        m = mem_size(rt, ctx)
        _, outs = query_io(rt, ctx)
        return m, io_bytes(rt, ctx), outs
    finally:
        rt.destroy(ctx)


# --------------------------------------------------------------------------- every result
def test_every_claim_has_a_result_and_a_verdict(results):
    assert set(results) == set(claims.MEASUREMENTS) == set(claims.CLAIMS)
    for name, r in results.items():
        assert r.verdict and r.claim and r.where.startswith("Chapter"), name
        assert r.holds in (True, False, None), name


def test_text_form_fits_five_lines_of_100_columns_and_names_the_simulator(results):
    for name, r in results.items():
        lines = repr(r).splitlines()
        assert 3 <= len(lines) <= claims.MAX_LINES, (name, lines)
        assert max(len(line) for line in lines) <= claims.MAX_COLUMNS, (name, lines)
        assert "simulated RK3588" in lines[0], (name, lines[0])
        assert "simulated RK3588" in r._repr_html_() and r.link in r._repr_html_()


def test_text_names_no_python_attribute(results):
    """Printed results are read by people: plain words, no ".board" or ".row(code)"."""
    for name, r in results.items():
        assert not re.findall(r"(?:^|[\s(])(\.[a-z_]\w*)(?=[(,;)]|$)", repr(r), flags=re.M), (name, repr(r))


def test_results_are_frozen(results):
    with pytest.raises(Exception):
        results["who_allocates"].flag0_dma = 0


def _anchor(heading: str) -> str:
    """The book's (MyST) anchor of a heading: lower case, punctuation dropped, spaces to '-'."""
    text = re.sub(r"[^a-z0-9 _-]", "", heading.lower()).strip()
    return re.sub(r"\s+", "-", text)


def test_links_point_at_real_headings_of_the_chapters():
    for claim, where, link in claims.CLAIMS.values():
        notebook, anchor = link.split("#")
        cells = json.loads((CHAPTERS / notebook).read_text(encoding="utf-8"))["cells"]
        headings = [line.lstrip("#").strip() for c in cells if c["cell_type"] == "markdown"
                    for line in "".join(c["source"]).splitlines() if line.startswith("## ")]
        matching = [h for h in headings if _anchor(h) == anchor]
        assert matching, f"{claim!r}: no heading of {notebook} has the anchor {anchor!r}"
        chapter = int(notebook[:2])
        section = int(matching[0].split(".")[0])
        assert where.startswith(f"Chapter {chapter} §{section}"), (where, link)


# --------------------------------------------------------------------------- the claims
def test_pointer_reuse_finds_the_same_address_and_an_allocation_in_every_get(results):
    r = results["pointer_reuse"]
    assert r.frames == 30
    assert r.same_address >= 1                    # malloc handed the freed block back
    assert r.allocating_gets == r.frames          # yet every get allocated
    assert r.heap_per_get_bytes >= r.output_bytes  # an output's worth each time
    assert r.holds is False and f"{r.same_address} of {r.frames}" in r.verdict
    # each printed line keeps its meaning alone: the address count and the allocation count
    first, second = r._numbers()
    assert first.endswith(f": same address on {r.same_address} of {r.frames} frames"), first
    assert second.startswith(f"gets that allocated: {r.allocating_gets} of {r.frames} (heap +"), second


def test_skip_release_grows_by_about_one_output_per_frame(results, rt):
    r = results["skip_release"]
    _, _, outs = _sizes(rt, "mobilenet_v2")
    assert r.output_bytes == sum(a.n_elems * 4 for a in outs)
    assert r.ratio_low <= r.ratio <= r.ratio_high
    # one output per frame, plus malloc's chunk header and the runtime's small bookkeeping
    assert 0.98 <= r.ratio_low and r.ratio_high <= 1.10
    assert r.released_words.startswith("flat")     # the control: rknnlab's growth verdict, with its floor
    assert r.holds is False


def test_who_allocates_flag0_runtime_and_alloc_outside_you(results, rt):
    r = results["who_allocates"]
    m, io, _ = _sizes(rt, "mobilenet_v2")
    assert r.flag0_dma > 0 and r.outside_dma == 0
    assert (r.weight_bytes, r.internal_bytes, r.io_bytes) == (m.total_weight_size, m.total_internal_size, io)
    assert r.flag0_remainder == 0                  # the simulator allocates exactly these (A9, A10)
    assert r.yours_bytes == r.weight_bytes + r.internal_bytes + r.io_bytes
    assert r.outside_correct
    assert r.freed_at_destroy >= 0.9 * r.flag0_dma          # rknn_destroy frees the runtime's
    assert r.freed_at_destroy_mem >= 0.9 * r.yours_bytes    # rknn_destroy_mem frees yours
    assert r.holds is False
    # the sum names every term: no remainder term when there is none
    sum_line = r._numbers()[0]
    assert sum_line.endswith(f"+ io {claims._b(r.io_bytes)}") and "other" not in sum_line, sum_line


def test_who_allocates_names_the_runtimes_own_buffers(results):
    """A board allocates more than weights + internal + io (decision 10): the term is named."""
    board = dataclasses.replace(results["who_allocates"], flag0_remainder=3 << 20)
    assert board._numbers()[0].endswith(" + other 3.0 MiB"), board._numbers()[0]


def test_npu_memory_shows_in_the_process_ram(results):
    r = results["npu_memory_in_ram"]
    assert r.dma_bytes > 0
    assert r.ratio >= claims.RSS_SHARE and r.shared_rss_gain_bytes <= r.rss_gain_bytes
    assert r.assumptions == ("A1", "A2") and r.holds is False
    line = r._numbers()[1]
    if r.memfree_drop_bytes <= 0:       # this machine's MemFree did not see the simulator's pages
        assert line.startswith("MemFree did not fall (median") and "MemFree did not see the buffers" in r.verdict
        assert "cannot resolve" not in r.verdict
    assert "up to 0 B" not in repr(r)
    if r.memfree_drop_bytes < claims.MEMFREE_SHARE * r.dma_bytes or not r.memfree_resolves:
        assert "the RSS line decides" in r.verdict, r.verdict


@pytest.mark.parametrize("drop, noise, resolves, line, reason", [
    (0, 0, False, "MemFree did not fall (median 0 B; it did not move with nothing done either)",
     "did not see the buffers here"),
    (0, 96 * 1024, False, "MemFree did not fall (median 0 B; it moved up to 96 KiB with nothing done)",
     "did not see the buffers here"),
    (-4096, 8192, False, "MemFree did not fall (median: it rose 4,096 B; it moved up to 8,192 B with nothing done)",
     "did not see the buffers here"),
    (8192, 96 * 1024, False, "MemFree fell 8,192 B (median; it moved up to 96 KiB with nothing done)",
     "cannot resolve it here: it moved up to 96 KiB"),
    (2 << 20, 4096, True, "MemFree fell 2.0 MiB (median; it moved up to 4,096 B with nothing done)",
     "fell only 2.0 MiB here"),
])
def test_memfree_words_fit_its_numbers(drop, noise, resolves, line, reason):
    """Noise is the reason only when MemFree fell, within what it moves with nothing done; a MemFree
    that did not fall did not see the buffers (a container or VM)."""
    assert claims._memfree_line(drop, noise) == line
    assert reason in claims._memfree_undecided(drop, noise, resolves)


def test_core_masks_verdicts_follow_their_intervals(results):
    r = results["core_masks"]
    t = r.table
    assert sorted(set(t["model"])) == ["digits_cnn", "mobilenet_v2", "yolov5s"]
    assert set(t["mask"]) == {"RKNN_NPU_CORE_0", "RKNN_NPU_CORE_0_1", "RKNN_NPU_CORE_0_1_2", "RKNN_NPU_CORE_AUTO"}
    others = t[t["verdict"] != "reference"]
    assert ((others["speedup_low"] <= others["speedup"]) & (others["speedup"] <= others["speedup_high"])).all()
    multi = others[others["mask"] != "RKNN_NPU_CORE_AUTO"]
    # no gain: slower, or the whole interval within MIN_CHANGE of 1; unsure: a wider interval holding 1
    within = (multi["speedup_low"] >= 1 - MIN_CHANGE) & (multi["speedup_high"] <= 1 + MIN_CHANGE)
    no_gain = (multi["verdict"].isin(["slower", "about the same"]) | (within & (multi["verdict"] != "faster"))).any()
    unsure = ((multi["verdict"] == "cannot tell apart") & ~within).any()
    assert r.holds is (False if no_gain else None if unsure else True)
    assert ("not always" in r.verdict) is bool(no_gain)
    for model, best in r.best.items():
        rows = others[(others["model"] == model) & (others["verdict"] == "faster")]
        assert best == (rows.loc[rows["speedup"].idxmax(), "mask"].replace("RKNN_NPU_CORE_", "") if len(rows)
                        else "none faster than CORE_0")
    assert r.assumptions == ("A17", "A44", "A45")


def test_want_float_costs_four_times_the_bytes(results, rt):
    r = results["want_float_cost"]
    _, _, outs = _sizes(rt, "yolov5s")
    assert r.bytes_int8 == sum(a.size for a in outs)
    assert r.bytes_float == sum(a.n_elems * 4 for a in outs) == 4 * r.bytes_int8   # int8 outputs
    assert r.frames >= 100 and r.ratio_low <= r.ratio <= r.ratio_high
    assert r.ratio == pytest.approx(r.get_ms_float / r.get_ms_int8, rel=1e-6)
    if "slower" in r.verdict:
        assert r.ratio_low > 1
    assert r.holds is False


def test_max_once_right_for_one_context_wrong_in_parallel(results):
    r = results["max_once"]
    assert r.shapes >= 2 and r.shapes_correct == r.shapes and r.holds_one_context is True
    assert r.attempts > 0 and r.wrong > 0 and r.holds_in_parallel is False
    assert r.wrong_share == pytest.approx(r.wrong / r.attempts)
    assert r.holds is False


def test_sram_nothing_by_default_part_with_enable_sram(results, rt):
    r = results["sram_default"]
    m, _, _ = _sizes(rt, "mobilenet_v2")
    assert r.budget == RK3588_SRAM_BYTES == m.total_sram_size
    assert r.flag0_placed == 0
    assert 0 < r.first_placed <= min(r.budget, r.internal_bytes)
    assert r.first_free == r.budget - r.first_placed
    assert r.second_placed <= r.first_free and r.second_free == r.first_free - r.second_placed
    assert r.moved is False and r.holds is False


# --------------------------------------------------------------------------- the table
def test_claims_table_from_results(results):
    table = claims.claims_table(*results.values())
    assert list(table.columns) == ["claim", "first measured", "link", "re-measured here", "verdict", "holds"]
    assert len(table) == len(results)
    assert list(table["verdict"]) == [r.verdict for r in results.values()]
    assert list(table["holds"]) == [r.holds for r in results.values()]     # None kept, not NaN
    assert table.attrs["source"] == "simulated RK3588 — rknnlab sim"
    page = claims.table_html(table)
    assert page.count("<a href=") == len(results) and "simulated RK3588" in page


# --------------------------------------------------------------------------- bad input
def test_bad_input_gets_a_clear_error():
    with pytest.raises(TypeError, match="claims_table takes results"):
        claims.claims_table("pointer_reuse")
    with pytest.raises(ValueError, match="frames=1"):
        claims.pointer_reuse(frames=1, backend="sim")
    with pytest.raises(ValueError, match="frames=5"):
        claims.skip_release(frames=5, backend="sim")


def test_one_core_soc_has_no_masks_to_compare(monkeypatch):
    monkeypatch.setenv("RKNNLAB_SIM_SOC", "rk3568")
    with pytest.raises(ValueError, match="one NPU core"):
        claims.core_masks(backend="sim")


# --------------------------------------------------------------------------- the figure
def test_figure_table_rows_come_from_the_results(results):
    table = claims.figure_table(*results.values())
    r = results
    assert set(table["claim"]) == {"pointer_reuse", "skip_release", "npu_memory_in_ram", "core_masks",
                                   "want_float_cost"}     # accounts and counts add no ratio row
    row = table.set_index("label")
    assert row.loc["heap growth per frame ÷ outputs", "measured"] == r["skip_release"].ratio
    assert row.loc["output bytes, want_float 1 ÷ 0", "measured"] == 4
    speedups = table[table["claim"] == "core_masks"]
    assert len(speedups) == 3 and speedups["label"].str.contains("0_1_2").all()
    assert ((table["low"] <= table["measured"]) & (table["measured"] <= table["high"])).all()


def test_review_claims_figure_draws_every_row(results):
    pytest.importorskip("matplotlib")
    import matplotlib
    matplotlib.use("Agg")
    from rknnlab import plot
    table = claims.figure_table(*results.values())
    fig = plot.review_claims(table)
    ax = fig.axes[0]
    assert len(ax.get_yticklabels()) == len(table)
    assert "simulated RK3588" in ax.get_title(loc="left")
    import matplotlib.pyplot as plt
    plt.close(fig)


def test_a_soc_without_npu_sram_says_so(monkeypatch):
    monkeypatch.setenv("RKNNLAB_SIM_SOC", "rk3568")
    with pytest.raises(ValueError, match="no SRAM"):
        claims.sram_default(backend="sim")
