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
    assert m["allocating_gets"] == 0                         # the heap inside the get is fooled ...
    assert m["new_buffers"] >= 29                            # ... the buffer's bytes are not


def test_the_leak_keeps_one_output_per_get() -> None:
    m = watch.measure(variants.leak_no_release, iterations=30)
    assert m["allocating_gets"] == 30 and m["heap_kept_per_get"] > 3000


def test_malloc_perturb_is_set_for_the_block_only() -> None:
    """MALLOC_PERTURB_ reaches the processes started inside the block; the environment is restored."""
    before = os.environ.get("MALLOC_PERTURB_")
    with watch.malloc_perturb():
        assert os.environ["MALLOC_PERTURB_"] == watch.PERTURB
    assert os.environ.get("MALLOC_PERTURB_") == before


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
