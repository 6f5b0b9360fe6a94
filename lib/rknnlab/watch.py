"""Watch ``rknn_outputs_get`` from inside a variant: what each get allocates, and whether
the caller's buffers are new.

Reuse means no allocation per call.  Two measurements prove it (chapter 4 §3), because two
parties may allocate an output buffer:

- **the runtime**, inside the get (``is_prealloc = 0``): the heap in use (glibc
  ``mallinfo2``, ``uordblks + hblkhd``) just before and just after each get;
- **the caller**, before the get (``is_prealloc = 1`` into a buffer allocated anew): the
  bytes of each caller's buffer just before the get.  Under ``MALLOC_PERTURB_`` glibc fills
  the blocks it hands out with one byte value.  So a buffer allocated since a get last wrote
  into it no longer holds what that get wrote, even at the same address.  A reused buffer
  still does.

glibc's per-thread cache (tcache) holds freed blocks of up to 1,032 B, and it hands them
out again without the fill.  A fresh small buffer (digits_cnn's 40 B output, or
mobilenet_v2's 1,000 B int8 output) would then look reused.  So :func:`malloc_perturb` also
turns the cache off (``GLIBC_TUNABLES=glibc.malloc.tcache_count=0``) for the variants.
numpy keeps a cache of its own for array data under 1,024 B, which never reaches malloc:
watch a small buffer allocated per frame with malloc (as C does), not with numpy.

In a variant (it runs in the harness's fresh process)::

    def my_variant(lab):
        watch.watch_gets(lab)          # first: wraps lab.rt.outputs_get and lab.loop
        ...                            # the code under test, unchanged

    with watch.malloc_perturb():       # the variant's process inherits MALLOC_PERTURB_ (and no tcache)
        result = rknnlab.run(my_variant, model="mobilenet_v2", iterations=200)
    watch.table(result)                # one row per variant

``measure(variant)`` does all of this for one variant and returns its row as a dict.
``cost_per_frame()`` runs chapter 4's four ways of getting the outputs and returns their CPU
time.
``recorded(result, variant, name)`` reads back any number a variant sent with ``lab.timed``.
The counts are kept in the variant's process and sent once, when its loop ends (a row per
get would itself grow the memory being measured); only measured iterations count.  The heap
is the whole process's: another thread (the harness's sampler) may allocate during a get now
and then, so judge the share of gets that allocated, not one get.
"""
from __future__ import annotations

import contextlib
import ctypes
import os
from collections import OrderedDict
from typing import Any, Callable, Dict, Iterator, List, Tuple

from . import probe

#: the MALLOC_PERTURB_ value the course uses: glibc fills a block it hands out with
#: 0xff ^ 165 = 0x5A and a block it takes back with 165 = 0xA5
PERTURB = "165"
#: the least heap a get must gain to count as allocating (a chunk's header alone is 16) ...
ALLOCATING_BYTES = 64


def _allocating_threshold(outputs: List[Any]) -> int:
    """... and at least half the smallest output of the call (its size after the get):
    the question is whether the runtime allocates output buffers inside the get, and
    such a buffer holds an output.  A one-off allocation elsewhere in the process
    while the get runs (measured with Python 3.9: 944 B once, from the harness's
    sampling, never from the runtime) stays below that for every course model."""
    sizes = [int(o.size) for o in outputs if int(o.size) > 0]
    return max(ALLOCATING_BYTES, min(sizes) // 2) if sizes else ALLOCATING_BYTES
#: caller's buffers remembered (what the last get wrote into each); more than any variant uses in turn
_REMEMBERED = 16
#: distinct buffer addresses counted (enough to tell one from several)
_ADDRESSES = 10

#: the numbers watch_gets sends back, one row each in result.calls (the "function" column)
COUNTS = ("watch_gets", "watch_allocating_gets", "watch_heap_gained", "watch_new_buffers",
          "watch_addresses", "watch_heap_first", "watch_heap_last", "watch_kept_gets")


def watch_gets(lab: Any) -> Dict[str, Any]:
    """Install the watch in a variant's process; returns the counts it keeps.

    Wraps ``lab.rt.outputs_get`` (reads the heap around each get, and each caller's
    buffer before it) and ``lab.loop`` (sends the counts once, when the loop ends).
    Call it first in the variant, before the code under test."""
    heap = probe.Heap()
    real_get, real_loop = lab.rt.outputs_get, lab.loop
    half = max(lab.iterations // 2, 1)
    last: "OrderedDict[int, bytes]" = OrderedDict()   # caller's buffer -> what the last get left there
    counts: Dict[str, Any] = {"gets": 0, "allocating_gets": 0, "heap_gained": 0, "new_buffers": 0,
                              "addresses": set(), "heap_first": None, "heap_last": None}

    def outputs_get(ctx: int, outputs: List[Any], extend: Any = None) -> Any:
        new = sum(o.buf not in last or ctypes.string_at(o.buf, o.size) != last[o.buf]
                  for o in outputs if o.is_prealloc)
        with lab.recorder.quiet:   # the harness's other threads allocate nothing meanwhile
            before = heap.sample()["heap_in_use_bytes"]
            ret = real_get(ctx, outputs, extend)
            after = heap.sample()["heap_in_use_bytes"]
        for o in outputs:
            if o.is_prealloc:
                last[o.buf] = ctypes.string_at(o.buf, o.size)
                last.move_to_end(o.buf)
                if len(last) > _REMEMBERED:
                    last.popitem(last=False)
        if lab.recorder.stage == "measure":
            counts["gets"] += 1
            counts["allocating_gets"] += after - before >= _allocating_threshold(outputs)
            counts["heap_gained"] += after - before
            counts["new_buffers"] += new
            if len(counts["addresses"]) < _ADDRESSES and outputs:
                counts["addresses"].add(outputs[0].buf)
            if counts["gets"] == half:       # the kept heap is read over the second half:
                counts["heap_first"] = after   # one-off allocations of a run's start are left out
            counts["heap_last"] = after
        return ret

    def loop() -> Iterator[int]:
        yield from real_loop()
        sent = {"watch_gets": counts["gets"], "watch_allocating_gets": counts["allocating_gets"],
                "watch_heap_gained": counts["heap_gained"], "watch_new_buffers": counts["new_buffers"],
                "watch_addresses": len(counts["addresses"]),
                "watch_heap_first": counts["heap_first"] or 0, "watch_heap_last": counts["heap_last"] or 0,
                "watch_kept_gets": max(counts["gets"] - half, 0)}
        for name, value in sent.items():
            with lab.timed(name, nbytes=value):
                pass

    lab.rt.outputs_get = outputs_get
    lab.loop = loop
    return counts


#: the glibc tunable that turns the per-thread cache off: its blocks (up to 1,032 B) skip
#: MALLOC_PERTURB_'s fill
NO_TCACHE = "glibc.malloc.tcache_count=0"


@contextlib.contextmanager
def malloc_perturb(value: str = PERTURB) -> Iterator[None]:
    """Set ``MALLOC_PERTURB_`` for the processes started inside the block (the harness's
    variants), with glibc's per-thread cache turned off (``GLIBC_TUNABLES``, appended to any
    tunables already set): blocks of up to 1,032 B from that cache skip the fill.  The
    environment is restored afterwards."""
    saved = {k: os.environ.get(k) for k in ("MALLOC_PERTURB_", "GLIBC_TUNABLES")}
    os.environ["MALLOC_PERTURB_"] = value
    tunables = saved["GLIBC_TUNABLES"]
    os.environ["GLIBC_TUNABLES"] = f"{tunables}:{NO_TCACHE}" if tunables else NO_TCACHE
    try:
        yield
    finally:
        for name, old in saved.items():
            if old is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = old


def _row(calls: Any, variant: str) -> Dict[str, Any]:
    mine = calls[(calls["variant"] == variant) & calls["function"].isin(COUNTS)]
    sent = {f: int(v) for f, v in zip(mine["function"], mine["bytes"])}
    if "watch_gets" not in sent:
        raise ValueError(f"variant {variant!r} sent no watch counts: call watch.watch_gets(lab) first in it, "
                         "and loop with `for i in lab.loop():`")
    gets = sent["watch_gets"]
    per = max(gets, 1)
    return {
        "gets": gets,
        "allocating_gets": sent["watch_allocating_gets"],
        "heap_gained_per_get": sent["watch_heap_gained"] / per,
        "new_buffers": sent["watch_new_buffers"],
        "addresses": sent["watch_addresses"],
        "heap_kept_per_get": ((sent["watch_heap_last"] - sent["watch_heap_first"]) / sent["watch_kept_gets"]
                              if sent["watch_kept_gets"] else 0.0),
    }


def table(result: Any) -> Any:
    """One row per variant of ``result`` (a run of watched variants): gets measured, gets that
    allocated inside the call, mean heap gained per get, gets that found a caller's buffer
    new, distinct buffer addresses (up to 10), heap in use kept per get over the second half of
    the measured gets (the run's start may allocate once)."""
    import pandas as pd
    rows = {v: _row(result.calls, v) for v in result.variants}
    frame = pd.DataFrame(rows).T
    for column in ("gets", "allocating_gets", "new_buffers", "addresses"):
        frame[column] = frame[column].astype(int)
    return frame.round({"heap_gained_per_get": 0, "heap_kept_per_get": 0})


def measure(variant: Callable[[Any], None], model: str = "mobilenet_v2", iterations: int = 60,
            warmup: int = 3) -> Dict[str, Any]:
    """Run ``variant`` once under the watch, with ``MALLOC_PERTURB_`` set and glibc's tcache
    off (:func:`malloc_perturb`), in the harness's fresh process; return its row of
    :func:`table` as a dict."""
    import rknnlab

    def measured(lab: Any) -> None:
        watch_gets(lab)
        variant(lab)

    with malloc_perturb():
        result = rknnlab.run(measured, model=model, iterations=iterations, warmup=warmup, progress=False)
    run = result.runs[0] if hasattr(result, "runs") else None
    error = getattr(run, "error", None)
    if error:
        raise RuntimeError(f"{getattr(variant, '__name__', 'the variant')} failed in its process: {error}")
    return _row(result.calls, "measured")


def recorded(result: Any, variant: str, name: str) -> Any:
    """The numbers ``variant`` sent with ``lab.timed(name, nbytes=...)`` in its measured
    iterations, in run order, as a float array (e.g. the CPU time of one call, in µs)."""
    import numpy as np
    calls = result.calls
    mine = calls[(calls["variant"] == variant) & (calls["function"] == name) & (calls["stage"] == "measure")]
    return mine["bytes"].to_numpy(float) if len(mine) else np.zeros(0)


# --------------------------------------------------------------------------- cost per frame
#: chapter 4's "Going further: what each way costs per frame": four ways to get YOLOv5s's
#: outputs, each with its buffers or mems allocated once
WAYS = ("prealloc float32", "prealloc int8", "bound native int8", "bound plain float32")


def _bind_or_prealloc(rt: Any, ctx: int, name: str) -> Tuple[List[Any], List[Any], List[Any]]:
    """Set up one way of getting the outputs, once: (rknn_output list, bound mems, arrays to keep)."""
    import numpy as np
    from .experiment.variants import query_io
    from .rknn import abi
    _, attrs = query_io(rt, ctx, native=(name == "bound native int8"))
    outs: List[Any] = []
    mems: List[Any] = []
    keep: List[Any] = []
    for a in attrs:
        if name.startswith("bound"):
            if name == "bound plain float32":                         # (c2): the runtime converts
                a.type, a.fmt = abi.RKNN_TENSOR_FLOAT32, abi.RKNN_TENSOR_NCHW
            size = a.n_elems * 4 if name == "bound plain float32" else a.size_with_stride
            mems.append(rt.create_mem(ctx, size))
            rt.set_io_mem(ctx, mems[-1], a)
        else:                                                          # (b): the size rule
            want_float = int(name == "prealloc float32")
            keep.append(np.empty(a.n_elems * 4 if want_float else a.size, dtype=np.uint8))
            outs.append(abi.rknn_output(index=a.index, want_float=want_float, is_prealloc=1,
                                        buf=keep[-1].ctypes.data, size=keep[-1].nbytes))
    return outs, mems, keep


def _way(lab: Any, name: str) -> None:
    """The loop of one way; it records the process's CPU time (µs) inside rknn_run and inside
    get + release, as ``cpu_in_run`` and ``cpu_in_get``."""
    import time
    from .experiment.variants import frame_input
    from .rknn import abi
    rt = lab.rt
    ctx = rt.init(lab.model_path)
    outs, mems, keep = _bind_or_prealloc(rt, ctx, name)
    for i in lab.loop():
        rt.inputs_set(ctx, frame_input(lab.input(i)))
        cpu = time.process_time_ns()
        rt.run(ctx)
        with lab.timed("cpu_in_run", nbytes=(time.process_time_ns() - cpu) // 1000):
            pass
        if outs:
            cpu = time.process_time_ns()
            rt.outputs_get(ctx, outs)
            rt.outputs_release(ctx, outs)                              # the course's pairing
            with lab.timed("cpu_in_get", nbytes=(time.process_time_ns() - cpu) // 1000):
                pass
        for mem in mems:
            rt.mem_sync(ctx, mem, abi.RKNN_MEMORY_SYNC_FROM_DEVICE)    # the safe choice (chapter 4)
    for mem in mems:
        rt.destroy_mem(ctx, mem)                                       # mems first, then the context
    rt.destroy(ctx)


def prealloc_float32(lab: Any) -> None:
    """is_prealloc = 1, want_float = 1, buffers allocated once (way (b))."""
    _way(lab, "prealloc float32")


def prealloc_int8(lab: Any) -> None:
    """is_prealloc = 1, want_float = 0, buffers allocated once (way (b))."""
    _way(lab, "prealloc int8")


def bound_native_int8(lab: Any) -> None:
    """Output mems bound once with the native attr (way (c1)): no get."""
    _way(lab, "bound native int8")


def bound_plain_float32(lab: Any) -> None:
    """Output mems bound once with the plain attr set to FLOAT32 (way (c2)): no get."""
    _way(lab, "bound plain float32")


def cost_per_frame(model: str = "yolov5s", iterations: int = 100, warmup: int = 3) -> Tuple[Any, Dict[str, Any]]:
    """Run the four ways of :data:`WAYS`, each in the harness's fresh process; return the
    Result and, per variant, the CPU time (ms per frame) inside ``rknn_run`` and inside
    get + release: ``{variant: {"cpu_in_run": array, "cpu_in_get": array}}``."""
    import rknnlab
    result = rknnlab.run([prealloc_float32, prealloc_int8, bound_native_int8, bound_plain_float32],
                         model=model, iterations=iterations, warmup=warmup, progress=False)
    cpu = {v: {k: recorded(result, v, k) / 1e3 for k in ("cpu_in_run", "cpu_in_get")} for v in result.variants}
    return result, cpu
