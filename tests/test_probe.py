"""rknnlab.probe: the samplers read what /proc and glibc say, cheaply."""
from __future__ import annotations

import ctypes
import os
import time

import pytest

from rknnlab import probe


def _proc_meminfo() -> dict:
    out = {}
    with open("/proc/meminfo") as f:
        for line in f:
            k, v = line.split(":", 1)
            out[k] = int(v.split()[0])
    return out


def test_meminfo_fields_match_proc():
    m = probe.MemInfo()
    try:
        row = m.sample()
        ref = _proc_meminfo()
        assert set(row) >= {"mem_free_kb", "mem_available_kb", "cached_kb", "buffers_kb"}
        # the system moves between the two reads: allow 64 MiB
        for key, col in probe.MEMINFO_FIELDS:
            if key in ref:
                assert abs(row[col] - ref[key]) < 65536, (key, row[col], ref[key])
            else:
                assert col not in row
    finally:
        m.close()


def test_meminfo_parses_a_fake_file(tmp_path):
    f = tmp_path / "meminfo"
    f.write_text("MemTotal: 1000 kB\nMemFree:  200 kB\nMemAvailable: 300 kB\nBuffers: 4 kB\n"
                 "Cached: 50 kB\nSwapCached: 7 kB\nCmaTotal: 65536 kB\nCmaFree: 1024 kB\n")
    m = probe.MemInfo(str(f))
    assert m.sample() == {"mem_free_kb": 200, "mem_available_kb": 300, "cached_kb": 50,
                          "buffers_kb": 4, "cma_free_kb": 1024, "cma_total_kb": 65536}
    m.close()


def test_rss_follows_touched_memory():
    pm = probe.ProcessMemory()
    try:
        before = pm.rss_kb()
        buf = ctypes.create_string_buffer(64 << 20)  # zeroed by ctypes: the pages are touched
        after = pm.rss_kb()
        assert after - before > 48 * 1024, (before, after)
        del buf
        pss = pm.pss_kb()
        if os.path.exists("/proc/self/smaps_rollup"):
            assert pss is not None and pss > 0
    finally:
        pm.close()


def test_heap_sees_malloc_and_free():
    heap = probe.Heap()
    if not heap.available:
        pytest.skip(heap.note)
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    before = heap.sample()["heap_in_use_bytes"]
    ptrs = [libc.malloc(4000) for _ in range(500)]
    during = heap.sample()["heap_in_use_bytes"]
    for p in ptrs:
        libc.free(p)
    after = heap.sample()["heap_in_use_bytes"]
    assert during - before >= 500 * 4000 * 0.95
    assert during - after >= 500 * 4000 * 0.95


def test_probe_thread_rate_and_columns():
    state = {"i": 0}
    p = probe.Probe(hz=200, extra=lambda: (state["i"],), extra_columns=("iteration",))
    with p:
        for i in range(5):
            state["i"] = i
            time.sleep(0.04)
    n = len(p)
    # 0.2 s at 200 Hz = 40 ticks (+ the final one); allow a slow CI machine
    assert 20 <= n <= 50, n
    cols = p.take()
    assert all(len(v) == n for v in cols.values())
    t = cols["t_ns"]
    assert t == sorted(t)
    assert {"rss_kb", "pss_kb", "mem_free_kb", "heap_in_use_bytes", "iteration"} <= set(cols)
    # PSS only at slow_hz: most rows None
    assert sum(v is not None for v in cols["pss_kb"]) <= n // 10 + 2
    assert cols["iteration"][-1] == 4


def test_probe_rejects_bad_rates():
    with pytest.raises(ValueError, match="1000"):
        probe.Probe(hz=5000)
    with pytest.raises(ValueError):
        probe.Probe(hz=0)


def test_probe_cost_per_sample_is_small():
    p = probe.Probe(hz=200)
    try:
        n = 400
        t = time.thread_time_ns()
        for _ in range(n):
            p.sample()
        per = (time.thread_time_ns() - t) / n
    finally:
        p.close()
    # 200 Hz x per-sample cost < 1% of a core means < 50 us a sample; generous bound for CI
    assert per < 100_000, f"{per / 1000:.1f} us per sample"


def test_npu_probe_absent_on_a_pc_is_quiet(tmp_path):
    n = probe.NpuLoad(root=str(tmp_path))
    assert not n.available
    assert n.sample() == {"npu_load_pct": None, "npu_freq_hz": None}


def test_npu_probe_reads_a_fake_board(tmp_path):
    d = tmp_path / "sys/kernel/debug/rknpu"
    d.mkdir(parents=True)
    (d / "load").write_text("NPU load:  Core0: 30%, Core1:  0%, Core2: 60%,\n")
    f = tmp_path / "sys/class/devfreq/fdab0000.npu"
    f.mkdir(parents=True)
    (f / "cur_freq").write_text("1000000000\n")
    (f / "max_freq").write_text("1000000000\n")
    n = probe.NpuLoad(root=str(tmp_path))
    assert n.available
    assert n.sample() == {"npu_load_pct": 30.0, "npu_freq_hz": 1000000000}


def test_snapshot():
    row = probe.snapshot()
    assert row["rss_kb"] > 0 and row["mem_free_kb"] > 0
