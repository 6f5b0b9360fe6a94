"""What every measurement of rknnlab.profile shares: the source labels, the
spread of repeated timings, and the progress bar of the longer ones."""
from __future__ import annotations

import platform
import time
from contextlib import contextmanager
from typing import Any, Callable, Dict, Iterator, Optional, Sequence

import numpy as np

#: the label of numbers computed from a compiler report alone (no run)
REPORT_SOURCE = "{soc} compiler report (rknn-toolkit2 {toolkit}), no run"
#: what a simulated run measures by default: everything on the CPU is real, the NPU modeled
SIM_MEASURES = "CPU phases measured on this machine's CPU, NPU modeled"


def machine() -> str:
    """This machine's CPU, as the CPU-side measurements name it ("x86_64, 2 cores")."""
    import os
    cores = os.cpu_count() or 0
    return f"{platform.machine() or 'unknown CPU'}, {cores} core{'s' if cores != 1 else ''}"


def measured_here() -> str:
    """The label of a CPU timing taken in this process."""
    return f"measured on this machine's CPU ({machine()})"


def run_source(rt: Any, measures: str = SIM_MEASURES) -> str:
    """The label of a run through ``rt``: on the simulator "simulated RK3588: " and
    what was measured and what modeled; on a board its name (rknnlab.board.source_label)."""
    if getattr(rt, "backend", "") == "sim":
        return f"simulated {str(rt.soc).upper()}: {measures}"
    return rt.source


def spread(seconds: Sequence[float]) -> Dict[str, float]:
    """Median and interquartile range of repeated timings, in microseconds.

    Medians and quartiles, not mean and standard deviation: a repeat that
    another process interrupted takes many times as long, and one such
    outlier would move a mean; the IQR is the middle half of the repeats."""
    us = np.asarray(seconds, float) * 1e6
    if not len(us):
        raise ValueError("no timings to summarise")
    q1, med, q3 = np.percentile(us, [25, 50, 75])
    return {"median_us": float(med), "q1_us": float(q1), "q3_us": float(q3), "repeats": int(len(us))}


def time_repeats(fn: Callable[[], Any], repeats: int, warmup: int = 1) -> np.ndarray:
    """Wall time (s) of ``fn()`` over ``repeats`` calls after ``warmup`` untimed ones
    (the first call pays for page faults and cold caches, which the steady state does not)."""
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, not {repeats}")
    for _ in range(warmup):
        fn()
    out = np.empty(repeats)
    for i in range(repeats):
        t = time.perf_counter()
        fn()
        out[i] = time.perf_counter() - t
    return out


def ratio_interval(num: Sequence[float], den: Sequence[float], seed: int = 0,
                   draws: int = 2000) -> Dict[str, float]:
    """The ratio of two medians and its 95% bootstrap interval.

    Resampling each series with replacement keeps the uncertainty honest for
    the few repeats a fast notebook can afford; the interval says how far the
    ratio would move on another set of repeats taken the same way (not across
    machines or processes)."""
    a, b = np.asarray(num, float), np.asarray(den, float)
    rng = np.random.default_rng(seed)
    ra = np.median(rng.choice(a, (draws, len(a))), axis=1)
    rb = np.median(rng.choice(b, (draws, len(b))), axis=1)
    boot = ra / rb
    low, high = np.percentile(boot, [2.5, 97.5])
    return {"ratio": float(np.median(a) / np.median(b)), "low": float(low), "high": float(high)}


@contextmanager
def progress_bar(progress: Optional[bool], total: int, name: str) -> Iterator[Callable[[int], None]]:
    """A bar like rknnlab.run's (rknnlab.experiment.progress decides where it goes:
    None shows one only where a person watches, and only after a second);
    yields ``at(done)``."""
    from ..experiment.progress import RunProgress, choose
    bar = RunProgress(choose(progress), 1, total)
    bar.variant(0, name)
    try:
        yield bar.at
    finally:
        bar.close()
