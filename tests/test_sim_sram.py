"""Simulator: the RK3588 NPU SRAM (chapter 5): budget and pages, RKNN_FLAG_ENABLE_SRAM,
RKNN_FLAG_MEMORY_TRY_ALLOC_SRAM, MEM_SIZE's SRAM fields, the /sys/kernel/debug/rknpu/mm
bitmap, the RKNN_LOG_LEVEL=3 SRAM table and the time SRAM saves."""
from __future__ import annotations

import re

import numpy as np
import pytest

from rknnlab import models
from rknnlab.rknn import abi, buffers, errors
from rknnlab.sim import SimRuntime
from rknnlab.sim.sram import sram_for

TOTAL = 978_944          # the SRAM note: "SRAM total size: 978944"
PAGE = 4096


@pytest.fixture
def rt():
    runtime = SimRuntime("rk3588")
    assert sram_for("rk3588").free_bytes == TOTAL, \
        "SRAM is held before this test: an earlier test left an ENABLE_SRAM context or a " \
        "TRY_ALLOC_SRAM mem alive (SRAM is one allocator for the whole process)"
    yield runtime
    runtime.close()


def _path(name: str, soc: str = "rk3588") -> str:
    return str(models.model_path(name, soc))


def _mem_size(rt, ctx):
    return rt.query(ctx, abi.RKNN_QUERY_MEM_SIZE)


def _io_bytes(report) -> int:
    return sum(t["native"]["size_with_stride"] for t in report.data["inputs"] + report.data["outputs"])


def _bitmap_lines(used_pages: int):
    """The bitmap text as the note lays it out, built from its rules: a header, 32 pages
    a line numbered [000].., '*' used '.' free, then total / used / free bytes."""
    marks = "*" * used_pages + "." * (TOTAL // PAGE - used_pages)
    lines = ['SRAM bitmap: "*" - used, "." - free (1bit = 4KB)']
    lines += [f"[{i:03d}] [{marks[32 * i:32 * i + 32]}]" for i in range(-(-len(marks) // 32))]
    lines.append(f"SRAM total size: {TOTAL}, used: {used_pages * PAGE}, free: {TOTAL - used_pages * PAGE}")
    return lines


def test_budget_is_239_pages_of_4_kib():
    assert TOTAL == 239 * PAGE == 956 * 1024
    assert sram_for("rk3588").total_bytes == TOTAL
    for soc in ("rk3576", "rk3568", "rk3566", "rk3562"):
        assert sram_for(soc).total_bytes == 0


def test_bitmap_of_a_free_sram_has_the_notes_shape(rt):
    text = rt.sram_bitmap()
    assert text.splitlines() == _bitmap_lines(0)
    lines = text.splitlines()
    assert len(lines) == 1 + 8 + 1          # 7 full lines of 32 pages and one of 15
    assert lines[-2] == "[007] [" + "." * 15 + "]"


def test_try_alloc_sram_of_512_kib_gives_the_notes_second_bitmap(rt):
    ctx = rt.init(_path("digits_cnn"))
    before = _mem_size(rt, ctx).total_dma_allocated_size
    mem = rt.create_mem2(ctx, 512 * 1024, abi.RKNN_FLAG_MEMORY_TRY_ALLOC_SRAM)
    lines = rt.sram_bitmap().splitlines()
    assert lines == _bitmap_lines(128)
    assert lines[-1] == "SRAM total size: 978944, used: 524288, free: 454656"  # the note's figures
    assert lines[1:5] == [f"[{i:03d}] [{'*' * 32}]" for i in range(4)]
    assert _mem_size(rt, ctx).total_dma_allocated_size == before  # all of it in SRAM, no DRAM
    buffers.mem_view(mem)[:] = 7                                    # the CPU still sees it whole
    rt.destroy_mem(ctx, mem)
    assert rt.sram_bitmap().splitlines() == _bitmap_lines(0)


def test_try_alloc_sram_spills_what_does_not_fit_to_dram(rt):
    ctx = rt.init(_path("digits_cnn"))
    before = _mem_size(rt, ctx).total_dma_allocated_size
    size = 2 * 1024 * 1024 + 1
    mem = rt.create_mem2(ctx, size, abi.RKNN_FLAG_MEMORY_TRY_ALLOC_SRAM)
    assert _mem_size(rt, ctx).total_dma_allocated_size == before + size - TOTAL
    # now full: the next one gets only DRAM
    other = rt.create_mem2(ctx, 4096, abi.RKNN_FLAG_MEMORY_TRY_ALLOC_SRAM)
    assert _mem_size(rt, ctx).total_dma_allocated_size == before + size - TOTAL + 4096
    assert rt.sram_bitmap().splitlines()[-1].endswith("used: 978944, free: 0")
    rt.destroy_mem(ctx, other)
    rt.destroy(ctx)  # destroy frees the mems it made, and their SRAM
    assert sram_for("rk3588").free_bytes == TOTAL


def test_a_plain_create_mem2_takes_no_sram(rt):
    ctx = rt.init(_path("digits_cnn"))
    rt.create_mem2(ctx, 65536, abi.RKNN_FLAG_MEMORY_CACHEABLE)
    assert sram_for("rk3588").free_bytes == TOTAL


def test_enable_sram_puts_the_first_part_of_internal_in_sram(rt):
    report = models.load_report("mobilenet_v2")
    plain = rt.init(_path("mobilenet_v2"))
    size = _mem_size(rt, plain)
    assert (size.total_sram_size, size.free_sram_size) == (TOTAL, TOTAL)  # flag 0 answers too (A53)
    ctx = rt.init(_path("mobilenet_v2"), abi.RKNN_FLAG_ENABLE_SRAM)
    size = _mem_size(rt, ctx)
    assert report.total_internal_size > TOTAL  # so every page goes to it
    assert (size.total_sram_size, size.free_sram_size) == (TOTAL, 0)
    assert (_mem_size(rt, plain).total_sram_size, _mem_size(rt, plain).free_sram_size) == (TOTAL, 0)
    assert size.total_internal_size == report.total_internal_size
    assert size.total_dma_allocated_size == (report.total_weight_size + report.total_internal_size - TOTAL
                                             + _io_bytes(report))
    # a second context finds no free SRAM: all DRAM, and no SRAM table
    second = rt.init(_path("mobilenet_v2"), abi.RKNN_FLAG_ENABLE_SRAM)
    assert _mem_size(rt, second).total_dma_allocated_size == _mem_size(rt, plain).total_dma_allocated_size
    assert rt.sram_log(second) == ""
    rt.destroy(ctx)
    assert sram_for("rk3588").free_bytes == TOTAL


def test_a_small_internal_takes_whole_pages(rt):
    report = models.load_report("digits_cnn")
    ctx = rt.init(_path("digits_cnn"), abi.RKNN_FLAG_ENABLE_SRAM)
    pages = -(-report.total_internal_size // PAGE)
    assert _mem_size(rt, ctx).free_sram_size == TOTAL - pages * PAGE
    assert rt.sram_bitmap().splitlines() == _bitmap_lines(pages)
    dup = rt.dup_context(ctx)  # its own internal buffer, so its own pages
    assert _mem_size(rt, dup).free_sram_size == TOTAL - 2 * pages * PAGE


def test_internal_from_outside_gets_no_sram(rt):
    ctx = rt.init(_path("digits_cnn"), abi.RKNN_FLAG_ENABLE_SRAM | abi.RKNN_FLAG_INTERNAL_ALLOC_OUTSIDE)
    assert sram_for("rk3588").free_bytes == TOTAL
    assert rt.sram_log(ctx) == ""


def test_share_sram_needs_enable_sram_and_changes_nothing(rt):
    with pytest.raises(errors.RknnParamInvalidError, match="RKNN_FLAG_ENABLE_SRAM"):
        rt.init(_path("digits_cnn"), abi.RKNN_FLAG_SHARE_SRAM)
    a = rt.init(_path("digits_cnn"), abi.RKNN_FLAG_ENABLE_SRAM)
    b = rt.init(_path("digits_cnn"), abi.RKNN_FLAG_ENABLE_SRAM | abi.RKNN_FLAG_SHARE_SRAM)
    assert _mem_size(rt, a).total_dma_allocated_size == _mem_size(rt, b).total_dma_allocated_size
    assert _mem_size(rt, b).free_sram_size == TOTAL - 4 * PAGE  # two pages each: nothing shared


def test_other_socs_accept_the_flag_and_place_nothing():
    rt = SimRuntime("rk3568")
    try:
        ctx = rt.init(_path("digits_cnn", "rk3568"), abi.RKNN_FLAG_ENABLE_SRAM)
        size = _mem_size(rt, ctx)
        assert (size.total_sram_size, size.free_sram_size) == (0, 0)
        plain = rt.init(_path("digits_cnn", "rk3568"))
        assert size.total_dma_allocated_size == _mem_size(rt, plain).total_dma_allocated_size
        assert rt.sram_log(ctx) == ""
        assert rt.sram_bitmap().splitlines()[-1] == "SRAM total size: 0, used: 0, free: 0"
        mem = rt.create_mem2(ctx, 4096, abi.RKNN_FLAG_MEMORY_TRY_ALLOC_SRAM)
        assert rt._mem(mem, "test").sram_bytes == 0
    finally:
        rt.close()


# ----------------------------------------------------------------- the SRAM table
_ROW = re.compile(r"^(\d+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+\|\s+(0x[0-9a-f]{8})[ *](0x[0-9a-f]{8}) "
                  r"(0x[0-9a-f]{8})\s+\|\s+(\S+)$")


def _parse_log(text: str):
    head = re.search(r"Total allocated Internal SRAM Size: (\d+), Addr: \[(0x[0-9a-f]+), (0x[0-9a-f]+)\)", text)
    rows = [_ROW.match(line).groups() for line in text.splitlines() if _ROW.match(line)]
    footer = dict(re.findall(r"^(Total Weight Memory Size|Total Internal Memory Size|Predict SRAM Hit RW Amount): "
                             r"(\d+)$", text, re.M))
    return head, rows, footer


def test_sram_log_hits_are_the_overlap_with_the_sram_part(rt):
    report = models.load_report("mobilenet_v2")
    ctx = rt.init(_path("mobilenet_v2"), abi.RKNN_FLAG_ENABLE_SRAM)
    head, rows, footer = _parse_log(rt.sram_log(ctx))
    size, lo, hi = int(head.group(1)), int(head.group(2), 16), int(head.group(3), 16)
    assert size == TOTAL and hi - lo == TOTAL
    feature = report.data["feature_tensors"]
    assert len(rows) == len(feature)
    io = {t["native"]["name"] for t in report.data["inputs"] + report.data["outputs"]}
    hits = []
    for row, tensor in zip(rows, feature):
        layer_id, user, name = int(row[0]), row[1], row[2]
        start, end, nbytes, hit = int(row[6], 16), int(row[7], 16), int(row[8], 16), row[9]
        assert (layer_id, user, name) == (tensor["layer_id"], tensor["user"], tensor["tensor"])
        assert end - start == nbytes == tensor["size"]
        if name in io:
            assert hit == "\\" and not lo <= start < hi  # in its own buffer, as the note shows
            continue
        assert start == lo + tensor["start"]  # the plan's offset from the internal buffer's start
        expected = max(0, min(tensor["end"], TOTAL) - tensor["start"])
        assert int(hit, 16) == expected
        hits.append(expected)
    assert 0 < sum(hits) and any(h == 0 for h in hits)  # some tensors fit, some lie beyond
    assert int(footer["Predict SRAM Hit RW Amount"]) == 2 * sum(hits)
    assert int(footer["Total Internal Memory Size"]) == report.total_internal_size
    assert int(footer["Total Weight Memory Size"]) == report.total_weight_size


def test_sram_log_is_printed_at_init_with_log_level_3(rt, capsys, monkeypatch):
    monkeypatch.setenv("RKNN_LOG_LEVEL", "2")
    rt.destroy(rt.init(_path("digits_cnn"), abi.RKNN_FLAG_ENABLE_SRAM))
    assert "SramHit" not in capsys.readouterr().err
    monkeypatch.setenv("RKNN_LOG_LEVEL", "3")
    ctx = rt.init(_path("digits_cnn"), abi.RKNN_FLAG_ENABLE_SRAM)
    printed = capsys.readouterr().err
    assert "Total allocated Internal SRAM Size: 8192" in printed and "SramHit" in printed
    assert printed == rt.sram_log(ctx)
    rt.init(_path("digits_cnn"))  # no SRAM asked for: nothing printed
    assert capsys.readouterr().err == ""


# ----------------------------------------------------------------- time
def _perf_run_us(rt, ctx, report) -> int:
    rt.set_core_mask(ctx, abi.RKNN_NPU_CORE_0)
    image = np.zeros(report.data["inputs"][0]["plain"]["dims"], np.uint8)
    rt.inputs_set(ctx, [buffers.input_from_array(0, image, abi.RKNN_TENSOR_NHWC)])
    rt.run(ctx)
    return rt.query(ctx, abi.RKNN_QUERY_PERF_RUN).run_duration


def _layer_times(rt, ctx):
    detail = rt.query(ctx, abi.RKNN_QUERY_PERF_DETAIL)
    text = detail.perf_data.decode() if isinstance(detail.perf_data, bytes) else \
        __import__("ctypes").string_at(detail.perf_data).decode()
    times = {}
    for line in text.splitlines():
        fields = line.split(None, 11)
        if len(fields) == 12 and fields[0].isdigit():
            times[int(fields[0]) - 1] = int(fields[7])
    return times


def _served_bytes(report, sram_bytes: int):
    """{layer id: bytes of its traffic SRAM serves}, by hand from the plan: the hits of the
    tensors it reads plus those of the tensors it writes (each once), the model's input and
    output excepted (they live in their own buffers)."""
    io = {t["native"]["name"] for t in report.data["inputs"] + report.data["outputs"]}
    read, written = {}, {}
    for row in report.data["feature_tensors"]:
        if row["tensor"] in io:
            continue
        hit = max(0, min(row["end"], sram_bytes) - row["start"])
        read[row["layer_id"]] = read.get(row["layer_id"], 0) + hit
        written.setdefault(row["producer_layer_id"], {})[row["tensor"]] = hit
    return {i: read.get(i, 0) + sum(written.get(i, {}).values()) for i in set(read) | set(written)}


@pytest.mark.parametrize("name", ["yolov5n", "mobilenet_v2"])
def test_sram_shortens_the_layers_timed_by_their_bytes_only(rt, name):
    """A54: a layer the compiler gives 0 cycles is timed by the bytes it moves (A20), and
    SRAM takes its served share off them; a layer with cycles is timed by its compute and
    keeps its time. mobilenet_v2 has no 0-cycle NPU layer: SRAM leaves its run as it is."""
    from rknnlab.sim import timing_law
    report = models.load_report(name)
    flags = abi.RKNN_FLAG_COLLECT_PERF_MASK
    with_sram = rt.init(_path(name), flags | abi.RKNN_FLAG_ENABLE_SRAM)
    without = rt.init(_path(name), flags)
    fast, slow = _perf_run_us(rt, with_sram, report), _perf_run_us(rt, without, report)
    times_fast, times_slow = _layer_times(rt, with_sram), _layer_times(rt, without)
    # every row of the plan ends inside the internal buffer: with TOTAL bytes of it in SRAM
    # (or all of it, when smaller) each row's hit is its overlap with [0, TOTAL)
    served = _served_bytes(report, TOTAL)
    rate = timing_law.law_for("rk3588").zero_cycle_bytes_per_s
    saved_s, gained = 0.0, 0
    for layer in report.layers:
        i = layer["id"]
        if layer["target"] == "NPU" and layer["cycles_total"] == 0 and served.get(i):
            saving = min(served[i], layer["rw_kb"] * 1024) / rate
            assert times_slow[i] - times_fast[i] == pytest.approx(saving * 1e6, abs=1), layer  # us rows
            saved_s += saving
            gained += times_fast[i] < times_slow[i]
        else:
            assert times_fast[i] == times_slow[i], layer
    assert slow - fast == pytest.approx(saved_s * 1e6, abs=1)
    if name == "mobilenet_v2":
        assert not any(layer["target"] == "NPU" and layer["cycles_total"] == 0 for layer in report.layers)
        assert fast == slow
    else:
        assert gained > 5 and slow - fast > 100  # yolov5n: its Concat/Add/Resize/MaxPool layers
