"""Eight claims that circulate about RKNN memory, each re-measured briefly on this
machine's runtime (the simulated RK3588 on a PC, the board on a board), each pointing
back to the chapter section that measured it first.

Every function returns a small frozen result: the numbers it measured, ``verdict`` (one
sentence computed from them; a timing or growth verdict carries its 95% interval, and
says "cannot tell yet" when the run does not settle it), ``holds`` (True: the claim held
in this run, False: it failed, None: cannot tell), ``source`` (where it ran), and
``claim`` / ``where`` / ``link`` (the claim, and the section that measured it first).
Its text form is at most 5 lines of at most 100 columns; in a notebook it shows as a
small table.

Each reuses the measurement an earlier chapter built (rknnlab.watch, rknnlab.run and its
variants, rknnlab.layers, rknnlab.profile.multicore, rknnlab.allocation), so a number
here and the chapter's number come from the same code.  Each takes ``backend`` as
rknnlab.open_runtime does: it runs unchanged on a board.
"""
from __future__ import annotations

import html
import math
import textwrap
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..profile.cores import MIN_CHANGE
from ..rknn import abi

#: name -> (the claim as it circulates, the section that measured it first, its link target)
CLAIMS: Dict[str, Tuple[str, str, str]] = {
    "pointer_reuse": ("The pointer did not change, so the buffer is reused.",
                      "Chapter 4 §3", "04_output_reuse.ipynb#3-flat-memory-is-not-reuse"),
    "skip_release": ("rknn_outputs_release is optional.",
                     "Chapter 2 §6", "02_lifecycle.ipynb#6-four-classic-leaks-and-their-fixes"),
    "who_allocates": ("The driver manages NPU memory.",
                      "Chapter 1 §7", "01_memory_layers.ipynb#7-init-flags-who-allocates"),
    "npu_memory_in_ram": ("NPU memory is separate from system RAM.",
                          "Chapter 1 §1", "01_memory_layers.ipynb#1-where-memory-lives"),
    "core_masks": ("More NPU cores are always faster.",
                   "Chapter 3 §6", "03_bottlenecks.ipynb#6-more-cores"),
    "want_float_cost": ("want_float = 1 is free.",
                        "Chapter 3 §4", "03_bottlenecks.ipynb#4-cpu-side-costs"),
    "max_once": ("Allocate the maximum once and you are safe.",
                 "Chapter 5 §6, §4", "05_allocation.ipynb#6-dynamic-shapes"),
    "sram_default": ("SRAM is swapped in and out automatically.",
                     "Chapter 5 §7", "05_allocation.ipynb#7-sram-on-rk3588"),
}

#: the text form's limits (the chapter prints several results in one cell)
MAX_LINES = 5
MAX_COLUMNS = 100


# --------------------------------------------------------------------------- shared pieces
class _Claim:
    """What every result shares: the claim it answers, and its text and HTML forms.
    A subclass is a frozen dataclass with ``source``, ``verdict`` and ``holds`` fields and a
    ``_numbers()`` method (the measured numbers as one or two short lines)."""
    _name = ""

    @property
    def claim(self) -> str:
        return CLAIMS[self._name][0]

    @property
    def where(self) -> str:
        return CLAIMS[self._name][1]

    @property
    def link(self) -> str:
        return CLAIMS[self._name][2]

    @property
    def measured(self) -> str:
        """The measured numbers in one line (the table's "re-measured here" cell)."""
        return "; ".join(self._numbers())

    def _numbers(self) -> List[str]:
        raise NotImplementedError

    def _lines(self) -> List[str]:
        """The claim and where it ran, the numbers (at most 2 lines), the verdict (the rest):
        never more than MAX_LINES lines of MAX_COLUMNS (the whole verdict is in .verdict)."""
        def fit(line: str) -> str:
            return textwrap.shorten(line, MAX_COLUMNS, placeholder=" …")
        head = [fit(f"\"{self.claim}\" — {getattr(self, 'source')}")]
        body = [fit(line) for line in self._numbers()[:2]]    # a third line shows in HTML only
        room = MAX_LINES - len(head) - len(body)
        verdict = textwrap.wrap(f"verdict: {getattr(self, 'verdict')}", MAX_COLUMNS)
        if len(verdict) > room:
            verdict = verdict[:room - 1] + [fit(" ".join(verdict[room - 1:]))]
        return head + body + verdict

    def __repr__(self) -> str:
        return "\n".join(self._lines())

    def _repr_html_(self) -> str:
        e = html.escape
        rows = [("claim", f"{e(self.claim)} (first measured in <a href=\"{e(self.link)}\">{e(self.where)}</a>)")]
        rows += [("measured", e(line)) for line in self._numbers()]
        rows += [("verdict", f"<b>{e(getattr(self, 'verdict'))}</b>"), ("source", e(getattr(self, "source")))]
        cells = "".join(f"<tr><th style=\"text-align:left;padding:1px 8px\">{k}</th>"
                        f"<td style=\"text-align:left;padding:1px 8px\">{v}</td></tr>" for k, v in rows)
        caption = f"<caption style=\"text-align:left\">{self._name}</caption>"
        return f"<table style=\"font-size:90%\">{caption}{cells}</table>"


def _open(backend: str) -> Any:
    import rknnlab
    return rknnlab.open_runtime(backend)


def _close(rt: Any) -> None:
    close = getattr(rt, "close", None)
    if close is not None:
        close()


def _model_path(rt: Any, model: str) -> str:
    from ..allocation._common import model_file
    return model_file(rt, model)


def _b(n: float) -> str:
    """Bytes as the course prints them: "4,000 B", "1.5 MiB"."""
    if abs(n) >= 1 << 20:
        return f"{n / (1 << 20):,.1f} MiB"
    if abs(n) >= 10 * 1024:
        return f"{n / 1024:,.0f} KiB"
    return f"{n:,.0f} B"


def _check_positive(name: str, value: int, least: int) -> None:
    if value < least:
        raise ValueError(f"{name}={value}: at least {least}")


def _run_failed(result: Any) -> None:
    """rknnlab.run keeps a variant's error in its result: raise it here instead of
    judging a run that did not happen."""
    if result.errors:
        raise RuntimeError("; ".join(f"{name} failed in its process: {err}" for name, err in result.errors.items()))


# --------------------------------------------------------------------------- 1. pointer_reuse
def get_and_release(lab: Any) -> None:
    """is_prealloc = 0: the runtime allocates the outputs inside every get; each get is
    released.  Records, per measured frame, whether the get returned the address the get
    before it returned (rknnlab.watch counts the allocations inside the get).

    C::

        for (i = 0; i < n; i++) {
            rknn_run(ctx, NULL);
            rknn_outputs_get(ctx, 1, outs, NULL);   /* malloc inside */
            same += outs[0].buf == last; last = outs[0].buf;
            rknn_outputs_release(ctx, 1, outs);     /* free: the block goes back to malloc */
        }
    """
    from rknnlab import watch
    from rknnlab.experiment.variants import frame_input, query_io
    from rknnlab.rknn.abi import rknn_output
    watch.watch_gets(lab)                       # first: it wraps outputs_get and the loop
    rt = lab.rt
    ctx = rt.init(lab.model_path)
    _, out_attrs = query_io(rt, ctx)
    last = None
    for i in lab.loop():
        rt.inputs_set(ctx, frame_input(lab.input(i)))
        rt.run(ctx)
        outs = [rknn_output(index=a.index, want_float=1, is_prealloc=0) for a in out_attrs]
        rt.outputs_get(ctx, outs)
        address = outs[0].buf
        with lab.timed("claims_same_address", nbytes=int(address is not None and address == last)):
            pass
        last = address
        rt.outputs_release(ctx, outs)
    rt.destroy(ctx)


@dataclass(frozen=True, repr=False)
class PointerReuse(_Claim):
    """An is_prealloc = 0 get + release loop, watched as chapter 4 §3 does."""
    model: str
    frames: int
    same_address: int          # frames whose get returned the previous get's address
    allocating_gets: int       # gets inside which the heap grew by at least half an output
    heap_per_get_bytes: float  # mean heap gained inside one get
    output_bytes: int          # the outputs one get returns (want_float = 1: n_elems x 4)
    source: str
    verdict: str
    holds: Optional[bool]
    _name = "pointer_reuse"

    def _numbers(self) -> List[str]:
        return [f"{self.model}, is_prealloc = 0, get + release: same address on {self.same_address} of "
                f"{self.frames} frames",
                f"gets that allocated: {self.allocating_gets} of {self.frames} (heap "
                f"+{_b(self.heap_per_get_bytes)} inside each; outputs {_b(self.output_bytes)})"]


def pointer_reuse(frames: int = 50, model: str = "mobilenet_v2", backend: str = "auto") -> PointerReuse:
    """Claim: "the pointer did not change, so the buffer is reused".  An is_prealloc = 0
    loop of get + release runs ``frames`` frames in a fresh process (rknnlab.run), watched
    as chapter 4 §3 does (rknnlab.watch, MALLOC_PERTURB_ and no tcache): on how many frames
    the get returned the previous get's address, and in how many gets the runtime
    allocated.  ~1 s on the simulator."""
    import rknnlab
    from rknnlab import watch
    _check_positive("frames", frames, 2)
    with watch.malloc_perturb():
        result = rknnlab.run(get_and_release, model=model, iterations=frames, warmup=3, backend=backend,
                             progress=False)
    _run_failed(result)
    row = watch.table(result).loc["get_and_release"]
    same = int(watch.recorded(result, "get_and_release", "claims_same_address").sum())
    gets, allocating = int(row["gets"]), int(row["allocating_gets"])
    output_bytes = _output_bytes(backend, model, want_float=1)
    if gets == 0:
        verdict, holds = "cannot tell yet: no get was measured", None
    elif allocating == 0:
        verdict = (f"no get allocated in {gets} ({same} kept the address): the address says "
                   "nothing here, the heap inside the get does")
        holds = None
    else:
        verdict = (f"the same address on {same} of {gets} frames, yet {allocating} of {gets} gets "
                   "allocated: malloc hands back the block just freed. Reuse means no allocation "
                   "per call")
        holds = False
    return PointerReuse(model, gets, same, allocating, float(row["heap_gained_per_get"]), output_bytes,
                        result.source, verdict, holds)


def _output_bytes(backend: str, model: str, want_float: int) -> int:
    """The bytes one get returns: want_float = 1: n_elems x 4 per output; want_float = 0:
    attr.size (the output's own type)."""
    from ..experiment.variants import query_io
    rt = _open(backend)
    try:
        ctx = rt.init(_model_path(rt, model))
        try:
            _, outs = query_io(rt, ctx)
        finally:
            rt.destroy(ctx)
    finally:
        _close(rt)
    return sum(int(a.n_elems) * 4 if want_float else int(a.size) for a in outs)


# --------------------------------------------------------------------------- 2. skip_release
@dataclass(frozen=True, repr=False)
class SkipRelease(_Claim):
    """is_prealloc = 0 without rknn_outputs_release, against the same loop with it."""
    model: str
    frames: int
    output_bytes: int               # want_float = 1: n_elems x 4 per frame
    growth_per_frame: float         # malloc heap, bytes per frame (Theil-Sen slope)
    growth_pm: float                # its 95% half-width
    growth_words: str               # rknnlab's growth verdict in words
    ratio: float                    # growth / output_bytes
    ratio_low: float
    ratio_high: float
    released_growth_per_frame: float
    released_growth_pm: float
    released_words: str
    source: str
    verdict: str
    holds: Optional[bool]
    _name = "skip_release"

    def _numbers(self) -> List[str]:
        return [f"{self.model}, is_prealloc = 0, {self.frames} frames, outputs {_b(self.output_bytes)} per frame",
                f"malloc heap per frame: without release {self.growth_per_frame:,.0f} ± {self.growth_pm:,.0f} B, "
                f"with release {self.released_growth_per_frame:,.0f} ± {self.released_growth_pm:,.2g} B"]


def skip_release(frames: int = 200, model: str = "mobilenet_v2", backend: str = "auto") -> SkipRelease:
    """Claim: "rknn_outputs_release is optional".  Chapter 2's leak_no_release
    (is_prealloc = 0, no release) and alloc_per_call (the same loop, released) run
    ``frames`` frames each in fresh processes, the heap sampled at every call (rknnlab.run
    with sample_calls, as chapter 2 §6): the heap's growth per frame with its 95% interval,
    against one frame's outputs.  ~3 s on the simulator."""
    import rknnlab
    from ..experiment import variants
    _check_positive("frames", frames, 30)
    result = rknnlab.run([variants.leak_no_release, variants.alloc_per_call], model=model, iterations=frames,
                         warmup=5, backend=backend, sample_calls=True, progress=False)
    _run_failed(result)
    s = result.summary
    leak, paired = s.loc["leak_no_release"], s.loc["alloc_per_call"]
    out = _output_bytes(backend, model, want_float=1)
    slope, pm = float(leak["heap_slope_bytes_per_iter"]), float(leak["heap_slope_pm_bytes"])
    ratio, low, high = slope / out, (slope - pm) / out, (slope + pm) / out
    if leak["heap_verdict"] == "grows":
        verdict = (f"without release the heap grows {ratio:.2f}x one frame's outputs per frame (95% interval "
                   f"{low:.2f}–{high:.2f}); with release it "
                   + ("is flat" if paired["heap_verdict"] == "flat" else f"{paired['heap_growth']}"))
        holds: Optional[bool] = False
    elif leak["heap_verdict"] == "flat":
        verdict = f"no growth seen without release ({leak['heap_growth']})"
        holds = True
    else:
        verdict = f"cannot tell yet: {leak['heap_growth']}"
        holds = None
    return SkipRelease(model, int(leak["iterations"]), out, slope, pm, str(leak["heap_growth"]), ratio, low, high,
                       float(paired["heap_slope_bytes_per_iter"]), float(paired["heap_slope_pm_bytes"]),
                       str(paired["heap_growth"]), result.source, verdict, holds)


# --------------------------------------------------------------------------- 3. who_allocates
@dataclass(frozen=True, repr=False)
class WhoAllocates(_Claim):
    """The DMA total of one model with flag 0 and with RKNN_FLAG_MEM_ALLOC_OUTSIDE."""
    model: str
    flag0_dma: int              # total_dma_allocated_size, flag 0, after init and one run
    weight_bytes: int           # total_weight_size
    internal_bytes: int         # total_internal_size
    io_bytes: int               # size_with_stride of every native input and output
    flag0_remainder: int        # flag0_dma - weights - internal - io (decision 10: > 0 on a board)
    outside_dma: int            # total_dma_allocated_size with MEM_ALLOC_OUTSIDE, before you give memory
    yours_bytes: int            # what you created and set (weights, internal, io mems)
    outside_correct: bool       # the outside context's outputs equal flag 0's
    freed_at_destroy: int       # this process's shared RSS fall at rknn_destroy (flag 0)
    freed_at_destroy_mem: int   # ... at rknn_destroy_mem of your mems (MEM_ALLOC_OUTSIDE)
    source: str
    verdict: str
    holds: Optional[bool]
    _name = "who_allocates"

    def _numbers(self) -> List[str]:
        other = f" + other {_b(self.flag0_remainder)}" if self.flag0_remainder else ""
        return [f"{self.model}, flag 0: DMA {_b(self.flag0_dma)} = weights {_b(self.weight_bytes)} + internal "
                f"{_b(self.internal_bytes)} + io {_b(self.io_bytes)}{other}",
                f"MEM_ALLOC_OUTSIDE: runtime {_b(self.outside_dma)}, yours {_b(self.yours_bytes)}, "
                f"{'same outputs' if self.outside_correct else 'OUTPUTS DIFFER'}; rknn_destroy freed "
                f"{_b(self.freed_at_destroy)}",
                f"rknn_destroy_mem freed your {_b(self.freed_at_destroy_mem)} (shared RSS)"]   # HTML and table only


def _shared_rss() -> int:
    """This process's mapped shared pages (RssShmem + RssFile, bytes): where the
    simulator's DMA buffers show (memfds, A2).  A board's dma-bufs may show here too, or
    not at all: then the two "freed" numbers are 0 and say nothing."""
    from ..layers import process_memory
    now = process_memory()
    return int(now.get("RssShmem", 0)) + int(now.get("RssFile", 0))


def who_allocates(model: str = "mobilenet_v2", backend: str = "auto") -> WhoAllocates:
    """Claim: "the driver manages NPU memory".  As chapter 1 §7 and chapter 5 §3: with
    flag 0, librknnrt (a library in this process) asks for weights + internal + io
    (RKNN_QUERY_MEM_SIZE after init and one run: a board may allocate io at the first
    run, A10, and adds buffers of its own, decision 10); with RKNN_FLAG_MEM_ALLOC_OUTSIDE
    it asks for none, and you create and set them (rknn_create_mem, rknn_set_weight_mem,
    rknn_set_internal_mem, rknn_set_io_mem).  Both run the same seeded input; their
    outputs must be equal.  rknn_destroy frees what the runtime allocated;
    rknn_destroy_mem frees your mems.  ~0.5 s on the simulator."""
    from ..allocation._common import BoundIo, dma_total, io_bytes, mem_size, same_outputs
    from ..profile.phase_timing import frame_inputs
    rt = _open(backend)
    try:
        path = _model_path(rt, model)
        rt.destroy(rt.init(path))          # a process's first init has one-off costs of its own
        ctx = rt.init(path)
        try:
            m = mem_size(rt, ctx)
            weights, internal, io_total = int(m.total_weight_size), int(m.total_internal_size), io_bytes(rt, ctx)
            rt.inputs_set(ctx, frame_inputs(rt, ctx, 0))
            rt.run(ctx)
            flag0 = dma_total(rt, ctx)      # init and one run, before any mem of ours
            io = BoundIo.bind(rt, ctx)       # the reference outputs, bound as the outside context's
            try:
                io.write_inputs(0)
                rt.run(ctx)
                reference = io.read_outputs()
            finally:
                io.destroy()
        finally:
            before = _shared_rss()
            rt.destroy(ctx)
        freed = before - _shared_rss()

        ctx = rt.init(path, flag=abi.RKNN_FLAG_MEM_ALLOC_OUTSIDE)
        mems: List[Any] = []
        try:
            outside = dma_total(rt, ctx)
            m = mem_size(rt, ctx)
            mems.append(rt.create_mem(ctx, int(m.total_weight_size)))
            rt.set_weight_mem(ctx, mems[-1])
            mems.append(rt.create_mem(ctx, int(m.total_internal_size)))
            rt.set_internal_mem(ctx, mems[-1])
            io = BoundIo.bind(rt, ctx)
            mems += io.inputs + io.outputs
            yours = sum(int(mem.contents.size) for mem in mems)
            io.write_inputs(0)
            rt.run(ctx)
            correct = same_outputs(io.read_outputs(), reference)
        finally:
            before = _shared_rss()
            for mem in mems:                # your mems first, then the context
                rt.destroy_mem(ctx, mem)
            freed_mem = before - _shared_rss()
            rt.destroy(ctx)
    finally:
        _close(rt)
    remainder = flag0 - weights - internal - io_total
    verdict = (f"librknnrt (in this process) asked for {_b(flag0)} with flag 0, {_b(outside)} with "
               f"MEM_ALLOC_OUTSIDE (you gave {_b(yours)}). The driver hands out what it is asked for")
    if remainder:
        verdict += f"; {_b(remainder)} above weights + internal + io: the runtime's own buffers"
    if not correct:
        verdict += "; cannot tell yet: the outside context's outputs differ from flag 0's"
    holds: Optional[bool] = False if correct and flag0 > 0 else None
    return WhoAllocates(model, flag0, weights, internal, io_total, remainder, outside, yours, correct,
                        freed, freed_mem, rt.source, verdict, holds)


# --------------------------------------------------------------------------- 4. npu_memory_in_ram
@dataclass(frozen=True, repr=False)
class NpuMemoryInRam(_Claim):
    """System and process memory across one context's init and first run."""
    model: str
    dma_bytes: int                  # total_dma_allocated_size after init and one run
    rss_gain_bytes: int             # this process's VmRSS across init + run
    shared_rss_gain_bytes: int      # RssShmem + RssFile across init + run (mapped buffers)
    ratio: float                    # shared_rss_gain_bytes / dma_bytes
    memfree_drop_bytes: float       # median fall of MemFree across init + run (repeats)
    memfree_noise_bytes: float      # the largest change over as long a time with nothing done
    memfree_resolves: bool          # the fall stands out of that noise (rknnlab.layers.Spread)
    assumptions: Tuple[str, ...]    # the simulator assumptions this rests on (() on a board)
    source: str
    verdict: str
    holds: Optional[bool]
    _name = "npu_memory_in_ram"

    def _numbers(self) -> List[str]:
        tags = f" ({', '.join(self.assumptions)})" if self.assumptions else ""
        return [f"{self.model}: DMA total {_b(self.dma_bytes)}; this process: VmRSS +{_b(self.rss_gain_bytes)}, "
                f"shared +{_b(self.shared_rss_gain_bytes)}{tags}",
                _memfree_line(self.memfree_drop_bytes, self.memfree_noise_bytes)]


def _memfree_line(drop: float, noise: float) -> str:
    """MemFree's median fall across init + run, and how far it moved with nothing done."""
    idle = (f"it moved up to {_b(noise)} with nothing done" if noise > 0
            else "it did not move with nothing done either")
    if drop > 0:
        return f"MemFree fell {_b(drop)} (median; {idle})"
    median = "median 0 B" if drop == 0 else f"median: it rose {_b(-drop)}"
    return f"MemFree did not fall ({median}; {idle})"


def _memfree_undecided(drop: float, noise: float, resolves: bool) -> str:
    """Why MemFree does not show the buffers, in words that fit its numbers: it did not fall
    at all (it does not see them: a container's or VM's MemFree may not count them), its fall
    is within what it moves with nothing done, or it fell less than MEMFREE_SHARE of the total."""
    if drop <= 0:
        return "MemFree did not see the buffers here: a container or VM may not count them"
    if not resolves:
        return f"MemFree cannot resolve it here: it moved up to {_b(noise)} with nothing done"
    return f"MemFree fell only {_b(drop)} here"


#: a shared-RSS gain at least this share of the DMA total counts as "the DMA buffers are
#: in this process's RAM" (pages round up; a board may map less at init: A10)
RSS_SHARE = 0.9
#: a MemFree fall at least this share of the DMA total, and out of the noise, counts too
#: (MemFree is system-wide and moves in steps: chapter 1 §1)
MEMFREE_SHARE = 0.5


def npu_memory_in_ram(model: str = "yolov5s", repeats: int = 3, backend: str = "auto") -> NpuMemoryInRam:
    """Claim: "NPU memory is separate from system RAM".  As chapter 1 §1: this process's
    memory across one rknn_init + one run (rknnlab.layers.process_memory: VmRSS, and its
    shared part RssShmem + RssFile, where mapped buffers count), and MemFree across init +
    run, ``repeats`` times, against MemFree over as long with nothing done
    (rknnlab.layers.memfree_changes); both against the context's total_dma_allocated_size.
    The RK3588 NPU has no memory of its own but ~1 MB of SoC SRAM: its buffers are the
    same LPDDR.  On the simulator the pages come from this PC's RAM, which is assumption
    A1 (MemFree falls at allocation) and A2 (they count in RSS).  ~0.5 s on the simulator."""
    from ..allocation._common import dma_total
    from ..layers import memfree_changes, process_memory
    from ..profile.phase_timing import frame_inputs
    _check_positive("repeats", repeats, 1)
    rt = _open(backend)
    try:
        path = _model_path(rt, model)
        dma: List[int] = []

        def init_and_run() -> Any:
            ctx = rt.init(path)
            rt.inputs_set(ctx, frame_inputs(rt, ctx, 0))
            rt.run(ctx)                    # a board may allocate io buffers at the first run (A10)
            dma.append(dma_total(rt, ctx))
            return lambda: rt.destroy(ctx)

        init_and_run()()                   # a process's first init and run have one-off costs
        before = process_memory()
        undo = init_and_run()
        after = process_memory()
        undo()
        falls, idle = memfree_changes(init_and_run, repeats=repeats)
        simulated = rt.backend != "native"
    finally:
        _close(rt)
    total = max(dma)
    shared = sum(after.get(k, 0) - before.get(k, 0) for k in ("RssShmem", "RssFile"))
    ratio = shared / total if total else math.nan
    noise = float(max(abs(idle.low), abs(idle.high)))
    resolves = bool(falls.resolves(falls.median, idle))
    in_rss = total > 0 and ratio >= RSS_SHARE
    in_memfree = total > 0 and resolves and falls.median >= MEMFREE_SHARE * total
    found = []
    if in_rss:
        found.append(f"shared RSS grew {ratio:.2f}x the DMA total {_b(total)}")
    if in_memfree:
        found.append(f"MemFree fell {falls.median / total:.2f}x it")
    if found:
        verdict = "; ".join(found) + ": NPU buffers are pages of system RAM"
        if not in_memfree:
            verdict += f" ({_memfree_undecided(falls.median, noise, resolves)}; the RSS line decides)"
        holds: Optional[bool] = False
    else:
        verdict = (f"cannot tell yet: for a DMA total of {_b(total)}, shared RSS grew {_b(shared)}; "
                   + _memfree_undecided(falls.median, noise, resolves))
        holds = None
    return NpuMemoryInRam(model, total, int(after["VmRSS"] - before["VmRSS"]), int(shared), ratio,
                          float(falls.median), noise, resolves, ("A1", "A2") if simulated else (),
                          rt.source, verdict, holds)


# --------------------------------------------------------------------------- 5. core_masks
@dataclass(frozen=True, repr=False, eq=False)   # holds a DataFrame and a dict: no == or hash
class CoreMasks(_Claim):
    """rknn_run time of each model under each core mask (rknnlab.profile.multicore)."""
    models: Tuple[str, ...]
    table: Any                      # multicore's DataFrame (one row per model and mask)
    best: Dict[str, str]            # model -> the fastest mask, or why none is named
    assumptions: Tuple[str, ...]    # the timing model's assumptions on the simulator (() on a board)
    source: str
    verdict: str
    holds: Optional[bool]
    _name = "core_masks"

    def _numbers(self) -> List[str]:
        lines = []
        for model in self.models:
            rows = self.table[(self.table["model"] == model) & (self.table["verdict"] != "reference")]
            parts = [f"{_short_mask(r['mask'])} {r['speedup']:.2f}x [{r['speedup_low']:.2f}–{r['speedup_high']:.2f}]"
                     for _, r in rows.iterrows()]
            share = rows["split_share"].iloc[0] if len(rows) else math.nan
            lines.append(f"{model} ({share:.0%} split): " + ", ".join(parts))
        return lines


def _mask_outcome(row: Any) -> str:
    """"faster", "no gain" or "unsure" for one multi-core row of multicore's table.  No
    gain: slower, or the whole 95% interval within MIN_CHANGE of 1 (a change no
    application notices, even when the interval touches 1); unsure: a wider interval
    that holds 1."""
    if row["verdict"] == "faster":
        return "faster"
    within = 1 - MIN_CHANGE <= row["speedup_low"] and row["speedup_high"] <= 1 + MIN_CHANGE
    return "no gain" if row["verdict"] in ("slower", "about the same") or within else "unsure"


def _short_mask(name: str) -> str:
    return name.replace("RKNN_NPU_CORE_", "")


def _masks_for(soc: str) -> Tuple[int, ...]:
    """The masks this SoC's cores allow, one core first (multicore's reference), AUTO last."""
    from ..board import SOC_NPU_CORES
    cores = SOC_NPU_CORES.get(soc) or 1
    masks = [abi.RKNN_NPU_CORE_0]
    if cores >= 2:
        masks.append(abi.RKNN_NPU_CORE_0_1)
    if cores >= 3:
        masks.append(abi.RKNN_NPU_CORE_0_1_2)
    return tuple(masks + [abi.RKNN_NPU_CORE_AUTO]) if cores >= 2 else tuple(masks)


def core_masks(models: Sequence[str] = ("mobilenet_v2", "yolov5s", "digits_cnn"), runs: int = 30,
               backend: str = "auto") -> CoreMasks:
    """Claim: "more NPU cores are always faster".  rknnlab.profile.multicore (chapter 3 §6)
    times ``runs`` rknn_run calls of each model under CORE_0, CORE_0_1, CORE_0_1_2 and
    AUTO (the masks the SoC has), with the 95% interval of each speedup over one core.
    Only some ops split across cores (A17); on the simulator the times are its timing
    model's (A17, A44, A45: no number here is fixed, the law may be re-fitted).
    ~3 s on the simulator."""
    from ..profile import multicore
    names = [models] if isinstance(models, str) else list(models)
    if not names:
        raise ValueError("models: give at least one model")
    rt = _open(backend)
    try:
        masks = _masks_for(rt.soc)
        if len(masks) < 2:
            raise ValueError(f"{rt.soc.upper()} has one NPU core: there is no second core to compare")
        table = multicore(names, soc=rt.soc, masks=masks, runs=runs, backend=rt, progress=False)
        simulated = rt.backend != "native"
    finally:
        _close(rt)
    best: Dict[str, str] = {}
    outcomes: Dict[str, List[str]] = {"faster": [], "no gain": [], "unsure": []}
    for model in names:
        rows = table[(table["model"] == model) & (table["verdict"] != "reference")]
        faster = rows[rows["verdict"] == "faster"]
        best[model] = (_short_mask(faster.loc[faster["speedup"].idxmax(), "mask"]) if len(faster)
                       else "none faster than CORE_0")
        for _, r in rows.iterrows():
            if r["mask"] == "RKNN_NPU_CORE_AUTO":
                continue                   # AUTO picks cores itself: not "more cores"
            outcomes[_mask_outcome(r)].append(f"{model} {_short_mask(r['mask'])} {r['speedup']:.2f}x "
                                              f"[{r['speedup_low']:.2f}–{r['speedup_high']:.2f}]")
    if outcomes["no gain"]:
        verdict = f"not always: no gain above {MIN_CHANGE:.0%} for " + ", ".join(outcomes["no gain"])
        holds: Optional[bool] = False
    elif outcomes["unsure"]:
        verdict = "cannot tell yet for " + ", ".join(outcomes["unsure"]) + " (95% intervals)"
        holds = None
    else:
        verdict = "every multi-core mask was faster here, for these models only"
        holds = True
    if outcomes["faster"] and holds is not True:
        verdict += "; faster: " + ", ".join(outcomes["faster"])
    return CoreMasks(tuple(names), table, best, ("A17", "A44", "A45") if simulated else (),
                     rt.source, verdict, holds)


# --------------------------------------------------------------------------- 6. want_float_cost
@dataclass(frozen=True, repr=False)
class WantFloatCost(_Claim):
    """rknn_outputs_get with want_float = 0 and 1 (is_prealloc = 1, buffers allocated once)."""
    model: str
    frames: int
    get_ms_int8: float              # median time of one get, want_float = 0
    get_ms_float: float             # ... want_float = 1
    ratio: float                    # float over int8, with its 95% interval
    ratio_low: float
    ratio_high: float
    comparison: str                 # rknnlab.experiment.timing.compare in words
    bytes_int8: int                 # the buffers' bytes: attr.size per output
    bytes_float: int                # n_elems x 4 per output
    source: str
    verdict: str
    holds: Optional[bool]
    _name = "want_float_cost"

    def _numbers(self) -> List[str]:
        return [f"{self.model}, {self.frames} frames, median outputs_get: want_float = 0 {self.get_ms_int8:.3f} ms, "
                f"= 1 {self.get_ms_float:.3f} ms",
                f"output bytes: want_float = 0 {_b(self.bytes_int8)}, = 1 {_b(self.bytes_float)}"]


def want_float_cost(model: str = "yolov5s", frames: int = 100, backend: str = "auto") -> WantFloatCost:
    """Claim: "want_float = 1 is free".  Chapter 4's pair of variants want_float and
    want_int8 (is_prealloc = 1 into buffers allocated once by the size rule, every get
    released) run ``frames`` frames each in fresh processes (rknnlab.run); the time of each
    rknn_outputs_get is compared with rknnlab.experiment.timing.compare (ratio of medians,
    95% interval; it needs 100 frames or more, and says "cannot tell" with fewer), and the
    buffers' bytes from the output attrs.  ~4 s on the simulator for yolov5s."""
    import rknnlab
    from ..experiment import variants
    from ..experiment.timing import compare
    _check_positive("frames", frames, 2)
    result = rknnlab.run(list(variants.want_float_vs_int8), model=model, iterations=frames, warmup=3,
                         backend=backend, sample_hz=0, progress=False)
    _run_failed(result)
    calls = result.calls
    gets = calls[(calls["function"] == "outputs_get") & (calls["stage"] == "measure")]
    ms = {v: gets[gets["variant"] == v]["duration_us"].to_numpy(float) / 1e3 for v in ("want_float", "want_int8")}
    c = compare("want_float = 1", ms["want_float"], "want_float = 0", ms["want_int8"])
    b_int8, b_float = _output_bytes(backend, model, 0), _output_bytes(backend, model, 1)
    times = c.words("the outputs_get time")
    if c.verdict == "cannot tell apart":
        times = "cannot tell yet about time: " + times
    verdict = f"{b_float / b_int8:.0f}x the output bytes; {times}"
    holds: Optional[bool] = False if b_float > b_int8 or c.verdict == "slower" else None
    return WantFloatCost(model, int(min(len(ms["want_float"]), len(ms["want_int8"]))),
                         float(np.median(ms["want_int8"])), float(np.median(ms["want_float"])),
                         c.ratio, c.low, c.high, c.words("the outputs_get time"), b_int8, b_float,
                         result.source, verdict, holds)


# --------------------------------------------------------------------------- 7. max_once
@dataclass(frozen=True, repr=False)
class MaxOnce(_Claim):
    """(a) one context whose input shape changes; (b) two contexts on one internal buffer."""
    model: str                      # the dynamic-shape model of (a)
    shapes: int                     # input shapes it was built with
    shapes_correct: int             # shapes whose outputs equal a fresh context's at that shape
    largest_bytes: int              # the io mems, allocated once for the largest shape
    models: Tuple[str, ...]         # the two models of (b)
    attempts: int                   # runs at the same time (both models count)
    wrong: int                      # of them, runs with wrong outputs
    wrong_share: float              # wrong / attempts (NaN when none overlapped)
    corruption: str                 # rknnlab.allocation.corruption_verdict
    holds_one_context: Optional[bool]
    holds_in_parallel: Optional[bool]
    source: str
    verdict: str
    holds: Optional[bool]
    _name = "max_once"

    def _numbers(self) -> List[str]:
        return [f"(a) {self.model}: io for the largest shape ({_b(self.largest_bytes)}) allocated once: "
                f"{self.shapes_correct} of {self.shapes} shapes correct",
                f"(b) {' + '.join(self.models)} on one internal mem, at the same time: {self.wrong} of "
                f"{self.attempts} runs wrong"]


def _largest_once_correct(rt: Any, model: str, seed: int = 1) -> Tuple[int, int, int]:
    """(shapes, shapes whose outputs were right, bytes of the io mems): the io mems made
    once for the largest shape and bound again per shape (the user guide's way, as
    rknnlab.allocation.shape_sweep does), each shape's native outputs compared byte for
    byte with a fresh context set to that shape, its io sized exactly for it."""
    from ..allocation import input_shapes, set_shape
    from ..allocation._common import BoundIo, io_attrs, same_outputs
    path = _model_path(rt, model)
    ctx = rt.init(path)
    try:
        shapes = input_shapes(rt, ctx)
        sizes = []
        for dims in shapes:                # each shape's io, to allocate the largest once
            set_shape(rt, ctx, dims)
            ins, outs = io_attrs(rt, ctx, current=True)
            sizes.append([int(a.size_with_stride) for a in ins + outs])
        largest = [max(column) for column in zip(*sizes)]
        n_in = len(ins)
        io = BoundIo(rt, ctx)
        io.inputs = [rt.create_mem(ctx, n) for n in largest[:n_in]]
        io.outputs = [rt.create_mem(ctx, n) for n in largest[n_in:]]
        correct = 0
        try:
            for k, dims in enumerate(shapes):
                set_shape(rt, ctx, dims)
                ins, outs = io_attrs(rt, ctx, current=True)
                for mem, a in zip(io.inputs, ins):
                    a.type, a.fmt = abi.RKNN_TENSOR_UINT8, abi.RKNN_TENSOR_NHWC
                    rt.set_io_mem(ctx, mem, a)
                for mem, a in zip(io.outputs, outs):
                    rt.set_io_mem(ctx, mem, a)
                io.in_attrs, io.out_attrs = ins, outs
                io.frames.clear()          # the input's size changed with the shape
                io.write_inputs(seed + k)
                rt.run(ctx)
                got = io.read_outputs()
                fresh = rt.init(path)
                try:
                    set_shape(rt, fresh, dims)
                    ref = BoundIo.bind(rt, fresh, current=True)
                    try:
                        ref.write_inputs(seed + k)
                        rt.run(fresh)
                        correct += same_outputs(got, ref.read_outputs())
                    finally:
                        ref.destroy()
                finally:
                    rt.destroy(fresh)
            nbytes = io.nbytes
        finally:
            io.destroy()
    finally:
        rt.destroy(ctx)
    return len(shapes), correct, nbytes


def max_once(model: str = "mobilenet_v2_dynamic", models: Sequence[str] = ("mobilenet_v2", "resnet50"),
             repeats: int = 3, backend: str = "auto") -> MaxOnce:
    """Claim: "allocate the maximum once and you are safe".  (a) As chapter 5 §6: the io
    mems of the dynamic-shape ``model`` allocated once for its largest shape serve every
    shape; each shape's outputs are compared with a fresh context's.  (b) As chapter 5
    §4: two contexts (``models``) share one internal mem and run at the same time
    (rknnlab.allocation.parallel_corruption, ``repeats`` times): the share of wrong
    outputs.  ~1 s on the simulator."""
    from ..allocation import corruption_verdict, parallel_corruption
    _check_positive("repeats", repeats, 1)
    rt = _open(backend)
    try:
        shapes, correct, nbytes = _largest_once_correct(rt, model)
        table = parallel_corruption(models, repeats=repeats, rt=rt)
    finally:
        _close(rt)
    both = table[(table["mode"] == "at the same time") & (table["overlap_ms"] > 0)]
    attempts = int(both["runs"].sum())
    wrong = int((both["runs"] - both["correct_runs"]).sum())
    corruption = str(table.attrs.get("verdict") or corruption_verdict(table))
    one = correct == shapes if shapes else None
    # no wrong output in overlapping runs does not make sharing safe (no document says it
    # is): that stays None, as does a run that could not make the two overlap
    parallel: Optional[bool] = False if wrong and not corruption.startswith("cannot tell") else None
    a_text = (f"(a) right for one context: {correct} of {shapes} shapes correct" if one
              else f"(a) {correct} of {shapes} shapes correct")
    if parallel is False:
        b_text = f"(b) wrong for contexts at the same time on one internal mem: {wrong} of {attempts} runs wrong"
    else:
        b_text = f"(b) cannot tell yet for contexts at the same time: {corruption}"
    holds = False if parallel is False else (None if one else False)
    return MaxOnce(model, shapes, correct, nbytes, tuple(models), attempts, wrong,
                   wrong / attempts if attempts else math.nan, corruption, one, parallel,
                   rt.source, f"{a_text}; {b_text}", holds)


# --------------------------------------------------------------------------- 8. sram_default
@dataclass(frozen=True, repr=False)
class SramDefault(_Claim):
    """What lands in the NPU's SRAM with flag 0, with ENABLE_SRAM, and for a second context."""
    model: str
    budget: int                     # total_sram_size (RKNN_QUERY_MEM_SIZE): 956 KiB on RK3588
    flag0_placed: int               # free SRAM before minus after a flag 0 init
    internal_bytes: int             # total_internal_size of the model
    first_placed: int               # ... after a first RKNN_FLAG_ENABLE_SRAM init
    first_free: int                 # free_sram_size after it
    second_placed: int              # a second ENABLE_SRAM context of the same model
    second_free: int
    moved: bool                     # did free SRAM change across runs of the contexts
    runs: int
    source: str
    verdict: str
    holds: Optional[bool]
    _name = "sram_default"

    def _numbers(self) -> List[str]:
        return [f"{self.model} (internal {_b(self.internal_bytes)}), SRAM {_b(self.budget)}; placed: flag 0 "
                f"{_b(self.flag0_placed)}, ENABLE_SRAM {_b(self.first_placed)}, a second {_b(self.second_placed)}",
                f"free after them: {_b(self.second_free)}; free SRAM changed across {self.runs} runs: "
                f"{'yes' if self.moved else 'no'}"]


def sram_default(model: str = "mobilenet_v2", runs: int = 5, backend: str = "auto") -> SramDefault:
    """Claim: "SRAM is swapped in and out automatically".  As chapter 5 §7: free NPU SRAM
    (rknnlab.allocation.free_sram: RKNN_QUERY_MEM_SIZE free_sram_size, or the simulator's
    bitmap) before and after a flag 0 init, a first RKNN_FLAG_ENABLE_SRAM init and a
    second one of the same model; then ``runs`` runs of each context, and free SRAM again.
    ~0.3 s on the simulator; on a SoC without SRAM for the NPU it raises ValueError."""
    from ..allocation import free_sram
    from ..allocation._common import mem_size
    from ..profile.phase_timing import frame_inputs
    _check_positive("runs", runs, 1)
    rt = _open(backend)
    contexts: List[int] = []
    try:
        path = _model_path(rt, model)
        free0 = free_sram(rt)
        if free0 is None:
            # a board without root: free_sram_size is read through a context, so a first flag 0
            # context reads it before the measured one (it stays alive, placing what it places)
            contexts.append(rt.init(path))
            free0 = free_sram(rt, contexts[0])
        contexts.append(rt.init(path))
        budget = int(mem_size(rt, contexts[-1]).total_sram_size)
        if not budget:
            raise ValueError(f"{rt.soc.upper()}: RKNN_QUERY_MEM_SIZE reports no SRAM for the NPU "
                             "(total_sram_size 0); the claim is about RK3588")
        if free0 is None:
            raise ValueError("free SRAM cannot be read here (no free_sram_size, no driver bitmap)")
        internal = int(mem_size(rt, contexts[-1]).total_internal_size)
        free_after = [free_sram(rt, contexts[-1])]
        for _ in range(2):
            contexts.append(rt.init(path, flag=abi.RKNN_FLAG_ENABLE_SRAM))
            free_after.append(free_sram(rt, contexts[-1]))
        if any(f is None for f in free_after):
            raise ValueError("free SRAM cannot be read here (no free_sram_size, no driver bitmap)")
        for ctx in contexts:
            rt.inputs_set(ctx, frame_inputs(rt, ctx, 0))
        for _ in range(runs):
            for ctx in contexts:
                rt.run(ctx)
        free_end = free_sram(rt, contexts[-1])
    finally:
        for ctx in reversed(contexts):
            rt.destroy(ctx)
        _close(rt)
    f0, f1, f2 = (int(f) for f in free_after)
    placed = (int(free0) - f0, f0 - f1, f1 - f2)
    moved = free_end != f2
    verdict = (f"flag 0 placed {_b(placed[0])} in SRAM; ENABLE_SRAM placed {_b(placed[1])} at init, a second "
               f"context got {_b(placed[2])} of the {_b(f1)} left")
    verdict += ("; free SRAM changed across runs" if moved else "; nothing changed across runs: placed at init")
    holds: Optional[bool] = True if placed[0] > 0 or moved else False
    return SramDefault(model, budget, placed[0], internal, placed[1], f1, placed[2], f2, moved, runs,
                       rt.source, verdict, holds)


# --------------------------------------------------------------------------- the table
#: the eight re-measurements, in the chapter's order
MEASUREMENTS = ("pointer_reuse", "skip_release", "who_allocates", "npu_memory_in_ram", "core_masks",
                "want_float_cost", "max_once", "sram_default")
_COLUMNS = ("claim", "first measured", "link", "re-measured here", "verdict", "holds")


def claims_table(*results: Any, backend: str = "auto") -> Any:
    """One row per result: claim | first measured (chapter and section) | link (the
    notebook anchor, for a Markdown link) | re-measured here (the numbers, one line) |
    verdict | holds.  With no result given, runs all eight (~15 s on the simulator).
    ``attrs["source"]``: where they ran.  :func:`table_html` shows it compactly."""
    import pandas as pd
    if not results:
        results = tuple(globals()[name](backend=backend) for name in MEASUREMENTS)
    bad = [type(r).__name__ for r in results if not isinstance(r, _Claim)]
    if bad:
        raise TypeError(f"claims_table takes results of rknnlab.review's claims, not {', '.join(bad)}")
    rows = [{"claim": r.claim, "first measured": r.where, "link": r.link, "re-measured here": r.measured,
             "verdict": getattr(r, "verdict"), "holds": getattr(r, "holds")} for r in results]
    table = pd.DataFrame(rows, columns=list(_COLUMNS))
    table["holds"] = pd.Series([row["holds"] for row in rows], dtype=object)   # None stays None, not NaN
    sources = list(dict.fromkeys(_machine(getattr(r, "source")) for r in results))
    table.attrs["source"] = "; ".join(sources)
    return table


def figure_table(*results: Any) -> Any:
    """The numbers of the results that measure a ratio, beside what each claim predicts
    for it: one row per quantity (label, measured, low, high: its 95% interval or the
    value itself where the count is exact; claim_value: the value the claim predicts;
    claim_says: in words).  rknnlab.plot.review_claims draws it.  Results with no such
    ratio (who_allocates, max_once, sram_default: accounts and counts) add no row."""
    import pandas as pd
    rows: List[Dict[str, Any]] = []

    def add(r: Any, label: str, value: float, low: float, high: float, says: str, at: float) -> None:
        rows.append({"claim": r._name, "label": label, "measured": value, "low": low, "high": high,
                     "claim_says": says, "claim_value": at})
    for r in results:
        if isinstance(r, PointerReuse):
            share = r.allocating_gets / r.frames if r.frames else math.nan
            add(r, "gets that allocated (share)", share, share, share, "0: the buffer is reused", 0.0)
        elif isinstance(r, SkipRelease):
            add(r, "heap growth per frame ÷ outputs", r.ratio, r.ratio_low, r.ratio_high, "0: nothing to release", 0.0)
        elif isinstance(r, NpuMemoryInRam):
            add(r, "process shared RSS gained ÷ DMA total", r.ratio, r.ratio, r.ratio, "0: separate memory", 0.0)
        elif isinstance(r, CoreMasks):
            rows_ = r.table[r.table["verdict"] != "reference"]
            widest = rows_[rows_["cores"] == rows_["cores"].max()]
            for _, t in widest.drop_duplicates("model").iterrows():
                add(r, f"{t['model']}: speedup, {_short_mask(t['mask'])}", t["speedup"], t["speedup_low"],
                    t["speedup_high"], f"> 1: more cores, faster (here {int(t['cores'])} cores)", 1.0)
        elif isinstance(r, WantFloatCost):
            add(r, "outputs_get time, want_float 1 ÷ 0", r.ratio, r.ratio_low, r.ratio_high, "1: free", 1.0)
            add(r, "output bytes, want_float 1 ÷ 0", r.bytes_float / r.bytes_int8, r.bytes_float / r.bytes_int8,
                r.bytes_float / r.bytes_int8, "1: free", 1.0)
    table = pd.DataFrame(rows, columns=["claim", "label", "measured", "low", "high", "claim_says", "claim_value"])
    table.attrs["source"] = "; ".join(dict.fromkeys(_machine(getattr(r, "source")) for r in results))
    return table


def _machine(source: str) -> str:
    """"simulated RK3588 — rknnlab sim: ..." -> "simulated RK3588 — rknnlab sim"."""
    return source.split(":")[0]


def table_html(table: Any) -> str:
    """A claims_table as compact HTML: the "first measured" cell links to its section,
    the verdict in bold when the claim failed, the source under the table."""
    e = html.escape
    marks = {True: "held", False: "wrong", None: "cannot tell yet"}
    head = "".join(f"<th style=\"text-align:left\">{e(c)}</th>"
                   for c in ("claim", "first measured", "re-measured here", "verdict"))
    body = []
    for _, r in table.iterrows():
        holds = r["holds"] if r["holds"] in (True, False) else None
        verdict = f"{marks[holds]}: {e(r['verdict'])}"
        body.append("<tr>" + "".join(f"<td style=\"text-align:left;vertical-align:top\">{cell}</td>" for cell in (
            e(r["claim"]), f"<a href=\"{e(r['link'])}\">{e(r['first measured'])}</a>", e(r["re-measured here"]),
            f"<b>{verdict}</b>" if holds is False else verdict)) + "</tr>")
    source = e(table.attrs.get("source", ""))
    return (f"<table style=\"font-size:85%\"><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody>"
            f"<caption style=\"caption-side:bottom;text-align:left\">{source}</caption></table>")
