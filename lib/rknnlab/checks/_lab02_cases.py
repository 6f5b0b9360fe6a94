"""What Lab 2's checks hand to the student: private (import them from nowhere).

The variants carry no docstrings and neutral names on purpose: help() and __name__ must
not give the answer away.  The harness imports them by name in the variant's process, so
they are module-level functions; what each one does is decided here, not in a table the
notebook can read.  The traces of exercise 5 are drawn here too, with their truth.
"""
from __future__ import annotations

import os
from typing import Any, Callable, Dict, List, Tuple

import numpy as np

from ..experiment.variants import frame_input, query_io
from ..i18n import pick as L
from ..rknn import abi


# --------------------------------------------------------------------------- exercise 4: lifecycles
def _per_frame_context(lab: Any) -> None:
    rt = lab.rt
    for i in lab.loop():
        ctx = rt.init(lab.model_path)
        _, attrs = query_io(rt, ctx)
        bufs = [np.empty(a.n_elems, np.float32) for a in attrs]
        outs = [abi.rknn_output(index=a.index, want_float=1, is_prealloc=1, buf=b.ctypes.data,
                                size=b.nbytes) for a, b in zip(attrs, bufs)]
        rt.inputs_set(ctx, frame_input(lab.input(i)))
        rt.run(ctx)
        rt.outputs_get(ctx, outs)
        rt.outputs_release(ctx, outs)
        rt.destroy(ctx)


def _unreleased(lab: Any) -> None:
    rt = lab.rt
    ctx = rt.init(lab.model_path)
    _, attrs = query_io(rt, ctx)
    for i in lab.loop():
        rt.inputs_set(ctx, frame_input(lab.input(i)))
        rt.run(ctx)
        outs = [abi.rknn_output(index=a.index, want_float=1, is_prealloc=0) for a in attrs]
        rt.outputs_get(ctx, outs)                   # no rknn_outputs_release
    rt.destroy(ctx)


def _mems_kept(lab: Any) -> None:
    # each frame's output goes into a DMA buffer of its own (for a later stage, say),
    # made with the context and never given back with rknn_destroy_mem
    rt = lab.rt
    ctx = rt.init(lab.model_path)
    _, attrs = query_io(rt, ctx)
    for i in lab.loop():
        mems = [rt.create_mem(ctx, a.n_elems * 4) for a in attrs]
        outs = [abi.rknn_output(index=a.index, want_float=1, is_prealloc=1, buf=m.contents.virt_addr,
                                size=a.n_elems * 4) for a, m in zip(attrs, mems)]
        rt.inputs_set(ctx, frame_input(lab.input(i)))
        rt.run(ctx)
        rt.outputs_get(ctx, outs)
        rt.outputs_release(ctx, outs)
    rt.destroy(ctx)


def _loop_once(lab: Any, keep_every_output: bool) -> None:
    rt = lab.rt
    ctx = rt.init(lab.model_path)
    _, attrs = query_io(rt, ctx)
    bufs = [np.empty(a.n_elems, np.float32) for a in attrs]
    outs = [abi.rknn_output(index=a.index, want_float=1, is_prealloc=1, buf=b.ctypes.data,
                            size=b.nbytes) for a, b in zip(attrs, bufs)]
    history: List[np.ndarray] = []
    best: List[int] = []
    for i in lab.loop():
        rt.inputs_set(ctx, frame_input(lab.input(i)))
        rt.run(ctx)
        rt.outputs_get(ctx, outs)
        rt.outputs_release(ctx, outs)
        if keep_every_output:
            history.append(bufs[0].copy())          # every frame's scores, kept
        else:
            best.append(int(np.argmax(bufs[0])))    # one number per frame
        if len(best) > 100:
            best.clear()
    rt.destroy(ctx)


_PLAY: Dict[str, Callable[[Any], None]] = {
    "context_per_frame": _per_frame_context,
    "outputs_not_released": _unreleased,
    "mems_not_destroyed": _mems_kept,
    "python_keeps_outputs": lambda lab: _loop_once(lab, keep_every_output=True),
    "clean": lambda lab: _loop_once(lab, keep_every_output=False),
}
#: the words diagnose() may return (the notebook prints them with their meaning)
KINDS = tuple(_PLAY)


def _mystery_order() -> List[str]:
    """Exercise 4's kinds for A..E: one of each, in a seeded order."""
    return [KINDS[int(i)] for i in np.random.default_rng(2_0202).permutation(len(KINDS))]


def mystery_A(lab: Any) -> None:
    _PLAY[_mystery_order()[0]](lab)


def mystery_B(lab: Any) -> None:
    _PLAY[_mystery_order()[1]](lab)


def mystery_C(lab: Any) -> None:
    _PLAY[_mystery_order()[2]](lab)


def mystery_D(lab: Any) -> None:
    _PLAY[_mystery_order()[3]](lab)


def mystery_E(lab: Any) -> None:
    _PLAY[_mystery_order()[4]](lab)


#: the kind case_x plays, drawn by exercise 4's check for each check and passed to the
#: variant's process in the environment (so no fixed answer fits it)
CASE_X_ENV = "RKNNLAB_CHECKS_LAB02_CASE_X"


def case_x(lab: Any) -> None:
    _PLAY[os.environ.get(CASE_X_ENV, "clean")](lab)


def leak_cases() -> List[Callable[[Any], None]]:
    return [mystery_A, mystery_B, mystery_C, mystery_D, mystery_E, case_x]


def leak_truth(case: Callable[[Any], None], x_kind: str) -> str:
    kinds = dict(zip([mystery_A, mystery_B, mystery_C, mystery_D, mystery_E], _mystery_order()))
    kinds[case_x] = x_kind
    return kinds[case]


# --------------------------------------------------------------------------- exercise 5: traces
#: the trace kinds and the verdict each deserves
TRACE_TRUTH = {"flat": "flat", "leak": "grows", "step": "flat", "short": "cannot tell yet"}  # en-only
PAGE = 4096


def make_trace(kind: str, rng: np.random.Generator) -> Dict[str, np.ndarray]:
    """One RSS trace ({"iteration", "rss_bytes"}) of a kind: page-granular values, a start
    that settles, jitter of a few pages, and transient spikes (a temporary buffer that a
    sample happened to catch)."""
    n = int(rng.integers(15, 60)) if kind == "short" else int(rng.integers(1500, 5001))
    every = 1 if kind == "short" else int(rng.integers(5, 16))
    # a short trace is a window of a longer run, after its start settled
    start = int(rng.integers(200, 2000)) if kind == "short" else 0
    it = np.arange(start, start + n, every, dtype=float)
    base = 80 * 2**20 + rng.integers(0, 40) * 2**20
    settle = rng.uniform(1.0, 3.0) * 2**20 * (1 - np.exp(-it / (0.04 * max(n, 200))))
    jitter = rng.integers(-8, 9, size=it.size) * PAGE
    spikes = (rng.random(it.size) < 0.04) * rng.uniform(200, 900, size=it.size) * 1024
    v = base + settle + jitter + spikes
    if kind == "leak":
        v = v + rng.uniform(3.0, 8.0) * 1024 * it            # 3 to 8 KiB per iteration
    elif kind == "step":
        at = rng.uniform(0.35, 0.65) * n
        v = v + (it >= at) * rng.uniform(4.0, 8.0) * 2**20
    elif kind == "short":
        v = v + rng.choice([0.0, 4.0]) * 1024 * (it - start)
    return {"iteration": it, "rss_bytes": np.round(v / PAGE) * PAGE}


def trace_cases(seed: int, per_kind: int = 3) -> List[Tuple[str, Dict[str, np.ndarray]]]:
    """(kind, trace) pairs, ``per_kind`` of each kind, in a seeded random order."""
    rng = np.random.default_rng(seed)
    kinds = [k for k in TRACE_TRUTH for _ in range(per_kind)]
    return [(kinds[int(i)], make_trace(kinds[int(i)], rng)) for i in rng.permutation(len(kinds))]


def trace_why(kind: str) -> str:
    """What traces of this kind do (after "N trace(s)"), said only after a wrong answer."""
    if kind == "flat":
        return L("settling at the start, then level under page-sized jitter and short spikes",
                 "开始时处于启动稳定期，之后在页大小的抖动和短暂尖峰之下保持平稳")
    if kind == "leak":
        return L("rising by the same few KiB every iteration, under the same jitter and spikes",
                 "每次迭代都上升同样的几 KiB，叠加着同样的抖动和尖峰")
    if kind == "step":
        return L("rising once, by several MiB, then level (memory taken once and kept)",
                 "只上升一次，幅度为几 MiB，之后保持平稳（一次性占用并一直保留的内存）")
    if kind == "short":
        return L("with too few iterations for the noise: a growth of a few KiB per iteration and none "
                 "look the same",
                 "迭代次数太少，压不过噪声：每次迭代增长几 KiB 与不增长看起来一样")
    raise KeyError(kind)
