"""rknnlab.watch: the two measurements of reuse, on the simulator.

Each variant runs in the harness's fresh process, so these are real runs: the heap
inside each get sees the runtime's allocations (is_prealloc = 0), the caller's buffer
bytes under MALLOC_PERTURB_ see the caller's (is_prealloc = 1 into a new buffer).
"""
from __future__ import annotations

import os

import numpy as np
import pytest

pytest.importorskip("pandas")
pytest.importorskip("onnxruntime")

import rknnlab  # noqa: E402
from rknnlab import watch  # noqa: E402
from rknnlab.experiment import variants  # noqa: E402
from rknnlab.experiment.variants import frame_input, query_io  # noqa: E402
from rknnlab.rknn import abi  # noqa: E402


@pytest.fixture(autouse=True)
def _simulator(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RKNNLAB_BACKEND", "sim")


def prealloc_fresh(lab):
    """is_prealloc = 1, but a new buffer every frame: the get allocates nothing, the caller does."""
    rt = lab.rt
    ctx = rt.init(lab.model_path)
    _, attrs = query_io(rt, ctx)
    for i in lab.loop():
        scores = np.empty(attrs[0].n_elems, dtype=np.float32)
        outs = [abi.rknn_output(index=0, want_float=1, is_prealloc=1, buf=scores.ctypes.data,
                                size=scores.nbytes)]
        rt.inputs_set(ctx, frame_input(lab.input(i)))
        rt.run(ctx)
        rt.outputs_get(ctx, outs)
        rt.outputs_release(ctx, outs)
    rt.destroy(ctx)


def test_the_runtimes_allocations_show_inside_the_get() -> None:
    m = watch.measure(variants.alloc_per_call, iterations=30)
    assert m["gets"] == 30 and m["allocating_gets"] == 30
    assert 4000 <= m["heap_gained_per_get"] < 4400          # mobilenet_v2: 1,000 float32, plus a chunk header
    assert m["new_buffers"] == 0                            # no caller's buffer at all


def test_a_buffer_allocated_once_shows_nothing() -> None:
    m = watch.measure(variants.prealloc_output, iterations=30)
    # another thread of the process (the harness's sampler) may allocate during one get
    assert m["gets"] == 30 and m["allocating_gets"] <= 2 and m["new_buffers"] == 0
    assert abs(m["heap_gained_per_get"]) < 64


def test_a_fresh_caller_buffer_shows_only_in_its_bytes() -> None:
    m = watch.measure(prealloc_fresh, iterations=30)
    # the heap inside the get is fooled (another thread may allocate during one get) ...
    assert m["allocating_gets"] <= 2
    assert m["new_buffers"] >= 29                            # ... the buffer's bytes are not


def malloc_fresh_loop(lab, want_float):
    """is_prealloc = 1 into a buffer from malloc, allocated anew every frame and freed after
    it (as a C program would; numpy keeps small blocks in a cache of its own)."""
    import ctypes
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    rt = lab.rt
    ctx = rt.init(lab.model_path)
    _, attrs = query_io(rt, ctx)
    size = attrs[0].n_elems * 4 if want_float else attrs[0].size
    for i in lab.loop():
        buf = libc.malloc(size)
        outs = [abi.rknn_output(index=0, want_float=want_float, is_prealloc=1, buf=buf, size=size)]
        rt.inputs_set(ctx, frame_input(lab.input(i)))
        rt.run(ctx)
        rt.outputs_get(ctx, outs)
        rt.outputs_release(ctx, outs)
        libc.free(buf)
    rt.destroy(ctx)


def malloc_fresh_float(lab):
    malloc_fresh_loop(lab, 1)


def malloc_fresh_int8(lab):
    malloc_fresh_loop(lab, 0)


# digits_cnn's float32 output is 40 B; mobilenet_v2's int8 output is 1,000 B: both in tcache's range
SMALL_BUFFERS = [("digits_cnn", malloc_fresh_float), ("mobilenet_v2", malloc_fresh_int8)]


@pytest.mark.parametrize("model,variant", SMALL_BUFFERS)
def test_a_fresh_small_buffer_is_seen_as_new(model, variant) -> None:
    """Blocks up to 1,032 B come from glibc's tcache without MALLOC_PERTURB_'s fill; the watch
    turns the tcache off, so a fresh small buffer still shows as new."""
    m = watch.measure(variant, model=model, iterations=30)
    assert m["allocating_gets"] <= 2 and m["new_buffers"] >= 29


_REFILL = """
import ctypes, sys
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
n = int(sys.argv[1])
p = libc.malloc(n)
ctypes.memset(p, 0x11, n)
libc.free(p)
q = libc.malloc(n)
print(q == p, ctypes.string_at(q + 16, n - 16).hex()[:2])   # past the free list's two pointers
"""


@pytest.mark.parametrize("size", [40, 1000, 1024])
def test_the_tcache_skips_the_fill_and_the_tunable_restores_it(size) -> None:
    """The reason for the tunable: under MALLOC_PERTURB_ alone, a freed block of up to 1,032 B
    comes back from glibc's tcache with its old bytes (0x11); with the tcache off, it holds
    the fill 0x5A."""
    import subprocess
    import sys

    def refill(env):
        out = subprocess.run([sys.executable, "-c", _REFILL, str(size)], env=env, check=True,
                             capture_output=True, text=True).stdout.split()
        return out[0] == "True", out[1]
    base = {"PATH": os.environ.get("PATH", ""), "MALLOC_PERTURB_": watch.PERTURB}
    assert refill(base) == (True, "11")
    assert refill({**base, "GLIBC_TUNABLES": watch.NO_TCACHE})[1] == "5a"


def test_the_leak_keeps_one_output_per_get() -> None:
    m = watch.measure(variants.leak_no_release, iterations=30)
    assert m["allocating_gets"] == 30 and m["heap_kept_per_get"] > 3000


def test_malloc_perturb_is_set_for_the_block_only() -> None:
    """MALLOC_PERTURB_ reaches the processes started inside the block; the environment is restored."""
    before = os.environ.get("MALLOC_PERTURB_")
    with watch.malloc_perturb():
        assert os.environ["MALLOC_PERTURB_"] == watch.PERTURB
    assert os.environ.get("MALLOC_PERTURB_") == before


def test_malloc_perturb_turns_the_tcache_off_and_keeps_other_tunables(monkeypatch) -> None:
    monkeypatch.delenv("GLIBC_TUNABLES", raising=False)
    with watch.malloc_perturb():
        assert os.environ["GLIBC_TUNABLES"] == "glibc.malloc.tcache_count=0"
    assert "GLIBC_TUNABLES" not in os.environ
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.arena_max=2")
    with watch.malloc_perturb():
        assert os.environ["GLIBC_TUNABLES"] == "glibc.malloc.arena_max=2:glibc.malloc.tcache_count=0"
    assert os.environ["GLIBC_TUNABLES"] == "glibc.malloc.arena_max=2"


def test_table_has_one_row_per_watched_variant() -> None:
    def alloc_per_call(lab):
        watch.watch_gets(lab)
        variants.alloc_per_call(lab)

    def prealloc_output(lab):
        watch.watch_gets(lab)
        variants.prealloc_output(lab)

    with watch.malloc_perturb():
        result = rknnlab.run([alloc_per_call, prealloc_output], iterations=20, warmup=2, progress=False)
    table = watch.table(result)
    assert list(table.index) == ["alloc_per_call", "prealloc_output"]
    assert table.loc["alloc_per_call", "allocating_gets"] == 20
    assert table.loc["prealloc_output", "allocating_gets"] == 0


def test_an_unwatched_variant_is_a_clear_error() -> None:
    result = rknnlab.run(variants.alloc_per_call, iterations=3, warmup=0, progress=False)
    with pytest.raises(ValueError, match="watch.watch_gets"):
        watch.table(result)


def test_cost_per_frame_runs_the_four_ways() -> None:
    """Chapter 4's cost-per-frame box: four variants, each recording its CPU time in rknn_run;
    only the two prealloc ways make gets."""
    result, cpu = watch.cost_per_frame("yolov5s", iterations=4, warmup=1)
    assert list(cpu) == ["prealloc_float32", "prealloc_int8", "bound_native_int8", "bound_plain_float32"]
    for name, times in cpu.items():
        assert len(times["cpu_in_run"]) == 4 and (times["cpu_in_run"] > 0).all()
        assert len(times["cpu_in_get"]) == (4 if name.startswith("prealloc") else 0)


def test_a_get_allocates_when_it_gains_half_an_output_or_more() -> None:
    from types import SimpleNamespace as O
    assert watch._allocating_threshold([O(size=4000), O(size=1_000_000)]) == 2000
    assert watch._allocating_threshold([O(size=40)]) == watch.ALLOCATING_BYTES   # a chunk at least
    assert watch._allocating_threshold([O(size=0)]) == watch.ALLOCATING_BYTES    # nothing allocated yet
