"""rknnlab.probe: the samplers read what /proc and glibc say, cheaply."""
from __future__ import annotations

import ctypes
import mmap
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
        # a fresh anonymous mapping, not malloc: after earlier tests raised glibc's mmap
        # threshold, malloc may hand back heap pages that are already resident
        buf = mmap.mmap(-1, 64 << 20)
        buf.write(b"\x01" * (64 << 20))  # touch every page
        after = pm.rss_kb()
        assert after - before > 48 * 1024, (before, after)
        buf.close()
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


# --------------------------------------------------------------------------- the C sampler
def _c_probe(**kw):
    lib, note = probe.load_sampler()
    if lib is None:
        pytest.skip(f"no C sampler here: {note}")
    return probe.Probe(backend="c", **kw)


def _statm_rss_kb() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * (os.sysconf("SC_PAGE_SIZE") // 1024)


def test_c_sampler_builds_here():
    # the development machines and CI have a C compiler: the C sampler must build
    lib, note = probe.load_sampler()
    assert lib is not None, note
    p = probe.Probe()
    try:
        assert p.backend == "c", p.notes
    finally:
        p.close()


def test_c_sampler_rate_clock_and_columns():
    p = _c_probe(hz=200, extra_columns=("iteration", "stage"))
    p.extra_values[0] = 0   # before start: the thread's first sample is taken at once
    before = time.perf_counter_ns() - p.t0_ns
    waited = _runqueue_wait_ns()
    p.start()
    for i in range(5):
        p.extra_values[0] = i
        time.sleep(0.1)
    p.stop()
    waited = _runqueue_wait_ns() - waited
    after = time.perf_counter_ns() - p.t0_ns
    try:
        cols = p.take()
        n = len(p)
        # 0.5 s at 200 Hz (longer when the sleeps overslept) = ~100 slots, a row each
        # (+ the final one); allow a slow CI machine, and the slots the thread could not
        # take because the kernel kept it waiting for a CPU (measured)
        slots = (after - before) / p.period_ns
        assert 0.7 * (after - before - waited) / p.period_ns <= n <= slots + 5, (n, slots, waited)
        assert p.ticks == n and p.poll_rows == 0
        assert all(len(v) == n for v in cols.values())
        t = cols["t_ns"]
        # every slot has a row or is counted late: the slots between the first row (taken at
        # start) and the last (taken by stop), not the wall time around start() and stop(),
        # whose own latency grows on a slow machine (2 to 3 slots on one here)
        spanned = (t[-1] - t[0]) / p.period_ns + 1
        assert spanned - 2 <= n + p.late_ticks <= spanned + 3, (n, p.late_ticks, spanned, slots)
        assert t == sorted(t)
        # the rows are on the perf_counter clock: inside [before, after]
        assert before <= t[0] and t[-1] <= after, (before, t[0], t[-1], after)
        # 5 ms apart (a slot the thread was late for has no row)
        assert (t[-2] - t[0]) / (n - 2 + p.late_ticks) == pytest.approx(5e6, rel=0.25)
        assert cols["iteration"][0] == 0 and cols["iteration"][-1] == 4
        assert set(cols["iteration"]) == {0, 1, 2, 3, 4}
        assert all(v is None for v in cols["stage"])  # never written: NaN -> None
        # mid columns (meminfo, heap) in the first row, then every mid_every slots (40 ms),
        # and in the last row (stop() takes a full one); None elsewhere
        mids = [i for i, v in enumerate(cols["mem_free_kb"]) if v is not None]
        for c in ("mem_available_kb", "cached_kb", "buffers_kb", "heap_in_use_bytes"):
            assert [i for i, v in enumerate(cols[c]) if v is not None] == mids, c
        assert mids[0] == 0 and mids[-1] == n - 1
        gaps = [(t[b] - t[a]) / 1e6 for a, b in zip(mids[:-2], mids[1:-1])]
        assert 0.5 * n / p.mid_every <= len(mids) <= n / p.mid_every + 3, (len(mids), n)
        assert sorted(gaps)[len(gaps) // 2] == pytest.approx(1e3 * p.mid_every / p.hz, rel=0.2)
        if os.path.exists("/proc/self/smaps_rollup"):  # PSS every 5 s: first and last row only
            assert [i for i, v in enumerate(cols["pss_kb"]) if v is not None] == [0, n - 1]
            assert cols["pss_kb"][0] > 0
        ref = _proc_meminfo()
        last_mid = cols["mem_available_kb"][-1]
        # system-wide figures move with everything else on the machine: same order, right field
        assert abs(last_mid - ref["MemAvailable"]) < 262144
        free = cols["mem_free_kb"][-1]
        assert free <= last_mid   # MemAvailable counts MemFree plus what can be reclaimed
        assert 0 < cols["heap_in_use_bytes"][0] < 1 << 40
    finally:
        p.close()


def _poll_for(p, seconds: float, every_s: float = 0.001, record: list | None = None) -> int:
    """Poll like an instrumented variant: every ``every_s`` (busy: no sleep
    wake-ups of our own), for ``seconds``; the number of polls.  ``record``:
    gets each poll's (start, end) on the probe's t_ns scale."""
    n, end = 0, time.perf_counter() + seconds
    nxt = time.perf_counter()
    clock = time.perf_counter_ns
    while time.perf_counter() < end:
        if time.perf_counter() >= nxt:
            a = clock()
            p.poll()
            if record is not None:
                record.append((a - p.t0_ns, clock() - p.t0_ns))
            n += 1
            nxt += every_s
    return n


def _runqueue_wait_ns() -> int:
    """Time this process's threads have spent runnable but waiting for a CPU (the
    kernel's schedstat): what a loaded machine takes from a sampler's schedule."""
    total = 0
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                total += int(f.read().split()[1])
        except (OSError, IndexError, ValueError):
            pass
    return total


def _probe(backend: str, **kw):
    return _c_probe(**kw) if backend == "c" else probe.Probe(backend="python", **kw)


def _polled_run(backend: str, seconds: float):
    """A probe polled for ``seconds``: its columns, and the slots a poll was made in
    (a poll that started and ended in the same slot)."""
    p = _probe(backend, hz=200, extra_columns=("iteration",))
    try:
        p.extra_values[0] = 1
        p.start()
        polls: list = []
        _poll_for(p, seconds, record=polls)
        p.stop()
        cols = p.take()
        slot = lambda t: (t - p.slot0_ns) // p.period_ns  # noqa: E731
        polled = {slot(a) for a, b in polls if slot(a) == slot(b)}
        return p, cols, polled
    finally:
        p.close()


@pytest.mark.parametrize("backend", ["c", "python"])
def test_polls_fill_the_slots_and_the_thread_sleeps(backend):
    # 0.6 s = 120 slots.  On a loaded machine the polling loop itself is descheduled
    # for whole slots, which no sampler can fill from it: what is judged is that every
    # slot a poll was made in got its row, and (when the polls came in most slots, on
    # the first try or a second) that the thread slept meanwhile
    # a poll in a slot without a row takes it (under load the thread can be descheduled
    # between reading the clock and taking its row, and turn that slot's polls away: such
    # a slot is counted late, the sampler's own account of the slots it missed). Seen once
    # in a full CI run (alone, 2026-12-02): 3 such slots, 2 counted late; a second run is
    # judged then (a sampler that loses polled slots loses them in both)
    for attempt in range(2):
        p, cols, polled = _polled_run(backend, 0.6)
        slots = [(x - p.slot0_ns) // p.period_ns for x in cols["t_ns"]]
        missing = polled - set(slots)
        if len(polled) >= 0.9 * 120 and len(missing) <= p.late_ticks:
            break
    undisturbed = len(polled) >= 0.9 * 120
    n = len(cols["t_ns"])
    assert len(missing) <= p.late_ticks, (sorted(missing), p.late_ticks)
    # one row a slot; besides, the thread's rows: the first, one every mid_every slots,
    # the final one
    assert n <= 120 + 120 // p.mid_every + 3, n
    mids = [i for i, v in enumerate(cols["mem_free_kb"]) if v is not None]
    fast = [s for i, s in enumerate(slots) if i not in mids]
    assert len(fast) == len(set(fast))  # never two fast rows in one slot
    assert len(mids) >= 120 // p.mid_every - 2
    assert all(v == 1 for v in cols["iteration"])
    assert 0 < p.poll_ns < 0.2 * 0.6e9  # a few us a row (C), tens of us (Python)
    if undisturbed:
        # polls fill nearly all slots (where the poller was descheduled, the thread's
        # checks miss polls and it takes the rows itself, densely, for a while)
        assert n >= 110, n
        assert p.poll_rows >= 0.85 * 120 - p.mid_every, (p.poll_rows, n)
        # the thread woke to check on the polls every 40 ms (and every slot of the
        # first 40 ms, dense until the first check): ~25 times, not the 120 of a
        # dense thread; a 40 ms window (8 slots) with polls in fewer than 3/4 of its
        # slots sends it dense for the next one (8 wake-ups more), by design
        check = 8
        windows = {}
        for x in polled:
            windows[x // check] = windows.get(x // check, 0) + 1
        thin = sum(1 for w in range(120 // check) if windows.get(w, 0) < 0.75 * check)
        assert p.wakes <= 60 + check * thin, (p.wakes, thin)


@pytest.mark.parametrize("backend", ["c", "python"])
def test_the_thread_takes_over_when_polls_stop(backend):
    p = _probe(backend, hz=200)
    try:
        p.start()
        polls: list = []
        _poll_for(p, 0.3, record=polls)
        polled = p.take()
        quiet_from = time.perf_counter_ns() - p.t0_ns
        waited = _runqueue_wait_ns()
        time.sleep(0.4)  # a "call" that blocks: no polls
        waited = _runqueue_wait_ns() - waited
        quiet_to = time.perf_counter_ns() - p.t0_ns
        _poll_for(p, 0.3)
        p.stop()
        t = p.take()["t_ns"]
        # every slot a poll was made in has its row (how many: as many as the polling
        # loop got the CPU for, on a loaded machine fewer than the 60 slots)
        # (or is counted late, see test_polls_fill_the_slots_and_the_thread_sleeps)
        slot = lambda x: (x - p.slot0_ns) // p.period_ns  # noqa: E731
        missing = ({slot(a) for a, b in polls if slot(a) == slot(b)}
                   - {slot(x) for x in polled["t_ns"]})
        assert len(missing) <= p.late_ticks, (sorted(missing), p.late_ticks)
        # the thread checks on the polls every 40 ms: by the second check after
        # the polls stopped it is back at 200 Hz, a row every 5 ms slot
        # (less the slots the sampler's thread could not take because the kernel kept
        # it waiting for a CPU: on a loaded machine, measured, not guessed)
        dense_from = quiet_from + 90_000_000
        dense = [x for x in t if dense_from <= x <= quiet_to]
        assert len(dense) >= 0.9 * (quiet_to - dense_from - waited) / p.period_ns - 2, (len(dense), waited)
        gaps = sorted(b - a for a, b in zip(dense, dense[1:]))
        if waited < 0.1 * (quiet_to - dense_from):  # most wake-ups on time
            assert gaps[len(gaps) // 2] == pytest.approx(p.period_ns, rel=0.1), waited
        # a wake-up that comes a slot late leaves one slot empty
        assert gaps[-1] <= 3 * p.period_ns + waited, (gaps[-1], waited)
    finally:
        p.close()


@pytest.mark.parametrize("backend", ["c", "python"])
def test_poll_is_a_no_op_when_stopped(backend):
    p = _probe(backend, hz=200)
    try:
        p.poll()  # before start: nothing
        assert len(p) == 0
        p.start()
        p.stop()
        n = len(p)
        p.poll()
        assert len(p) == n
    finally:
        p.close()
    p.poll()  # after close: the due time stays "never" (C: not called)
    assert len(p) == n


def test_c_sampler_rss_matches_statm():
    p = _c_probe(hz=100)
    try:
        buf = ctypes.create_string_buffer(32 << 20)  # touched: RSS grows by 32 MiB
        ref = _statm_rss_kb()
        p.sample()
        rss = p.take()["rss_kb"][-1]
        assert abs(rss - ref) < 2048, (rss, ref)
        del buf
    finally:
        p.close()


def test_c_sampler_streams_while_running():
    p = _c_probe(hz=500)
    try:
        p.start()
        time.sleep(0.1)
        first = p.take()
        time.sleep(0.1)
        n1 = len(first["t_ns"])
        rest = p.take(n1)
        p.stop()
        assert n1 > 10 and len(rest["t_ns"]) > 10
        assert rest["t_ns"][0] > first["t_ns"][-1]
        assert len(p) >= n1 + len(rest["t_ns"])
        assert p.cpu_ns > 0
    finally:
        p.close()


def test_python_sampler_forced(monkeypatch):
    monkeypatch.setenv("RKNNLAB_SAMPLER", "python")
    p = probe.Probe(hz=200, extra_columns=("iteration",))
    assert p.backend == "python"
    with p:
        p.extra_values[0] = 7
        time.sleep(0.1)
    cols = p.take()
    assert 10 <= len(p) <= 30
    assert cols["iteration"][-1] == 7
    q = probe.Probe(backend="python")
    assert q.backend == "python"
    q.close()


def test_extra_callable_uses_the_python_sampler():
    p = probe.Probe(extra=lambda: (1,), extra_columns=("x",))
    try:
        assert p.backend == "python"
        assert any("extra() callable" in n for n in p.notes)
    finally:
        p.close()
    with pytest.raises(RuntimeError, match="extra"):
        probe.Probe(extra=lambda: (1,), extra_columns=("x",), backend="c")


def test_broken_compiler_falls_back_to_python(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("CC", "/bin/false")
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    monkeypatch.setattr(probe.tempfile, "tempdir", None)
    monkeypatch.setattr(probe, "_loaded", {})
    lib, note = probe.load_sampler()
    assert lib is None and "did not build" in note and "/bin/false" in note
    p = probe.Probe(hz=100)
    try:
        assert p.backend == "python"
        assert any("C sampler not used" in n and "did not build" in n for n in p.notes), p.notes
        with p:
            time.sleep(0.05)
        assert len(p) >= 3
    finally:
        p.close()
    with pytest.raises(RuntimeError, match="did not build"):
        probe.Probe(backend="c")


def test_c_sampler_cache_is_reused(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(probe, "_loaded", {})
    lib, note = probe.load_sampler()
    if lib is None:
        pytest.skip(note)
    built = list((tmp_path / "rknnlab").glob("_sampler-*.so"))
    assert len(built) == 1
    mtime = built[0].stat().st_mtime_ns
    monkeypatch.setattr(probe, "_loaded", {})
    monkeypatch.setattr(probe.subprocess, "run", None)  # would fail if it compiled again
    lib2, note2 = probe.load_sampler()
    assert lib2 is not None, note2
    assert built[0].stat().st_mtime_ns == mtime


def test_a_poll_that_outlives_its_probe_is_harmless():
    p = _c_probe(hz=200)
    poll = p.poll
    p.start()
    poll()
    del p  # freed without stop(): the C sampler is gone
    import gc
    gc.collect()
    for _ in range(3):
        poll()  # must not call into freed memory
        time.sleep(0.006)


@pytest.mark.parametrize("backend", ["c", "python"])
def test_take_new_hands_out_each_row_once_and_forgets_it(backend):
    p = _probe(backend, hz=1000, extra_columns=("iteration",))
    seen = []
    try:
        p.extra_values[0] = 7
        p.start()
        for _ in range(5):
            time.sleep(0.05)
            seen.append(p.take_new())
            assert len(p) < 100  # only what came since the last take_new is kept
        p.stop()
        seen.append(p.take_new())
    finally:
        p.close()
    t = [x for part in seen for x in part["t_ns"]]
    assert len(t) == p.ticks and t == sorted(t) and len(set(t)) == len(t)
    assert len(p) == 0
    assert all(v == 7 for part in seen for v in part["iteration"])
    mids = [x for part in seen for x in part["mem_free_kb"] if x is not None]
    assert len(mids) >= 0.25 * 10 - 1  # the 10 Hz rows keep their place among the rows
    with pytest.raises(ValueError, match="handed out"):
        p.take(0)
