"""Does memory grow with the iterations?  A slope, its uncertainty, and a verdict.

``growth(iteration, values)`` judges one memory column of a run (RSS, the
malloc heap in use or the runtime's DMA total, in bytes) sampled during the measured iterations.  The
method, and why:

1. **Lower envelope.**  The measured iterations are cut into ``blocks``
   (12) equal ranges and each range is represented by its smallest sample.
   Transient buffers (a conversion's temporary, a JSON message being sent)
   push samples up by hundreds of kB depending on when a sample lands; a
   leak raises the floor.  The envelope ignores the first and keeps the
   second.
2. **After settling.**  The first third of the ranges is left out of the
   fit: a flat loop often still settles there (heap arenas and caches
   reaching their working size), and what continues after it is what a
   longer run would show.  The growth of that first third is not lost: it
   is in the result's RSS and heap columns.
3. **One-off jumps set aside.**  A process's floor can rise once, by
   hundreds of KiB, at a point that depends on the interpreter and not on
   the loop: memory taken once and kept (a flat digits_cnn loop on the
   simulator, without the harness: one mmapped block of ~700 KiB near
   iteration 3,700 on Python 3.9, ~530 KiB near 2,800 on 3.11).  Within
   the first third it is settling (step 2); after it, it would widen the
   interval of step 5 by its full size (flat runs on 3.9 said "cannot tell", ±140
   bytes/iteration, and a 100-byte leak went unfound).  So one rise between
   neighbouring floors that stands far out from the other steps, with at
   least three level floors after it, is set aside: the floors after it
   move back by its excess over the median step, the fit counts it as a
   parameter, and the verdict names it ("a one-off jump of +704 KiB near
   iteration 4,160 set aside").  Only rises, only one (two steps in a row
   when the jump falls inside a range), never at the end: see
   ``_set_aside_jump``.  A leak raises the floor at every step, so it stays in
   the slope.
4. **Robust slope.**  The slope through the remaining eight floors is the
   Theil-Sen estimator (the median of the slopes between every pair of
   them): one step of the floor moves it little, where least squares would
   follow it.
5. **Uncertainty from the run's own noise.**  The half-width of a 95%
   interval is Student's t (6 degrees of freedom; one fewer per step of a
   jump set aside) times the standard error
   of the slope computed from the residuals around that line, inflated by
   ``sqrt((1 + r) / (1 - r))`` where ``r`` is the residuals' lag-1
   autocorrelation (clipped to 0..0.8): neighbouring floors of a memory
   curve are not independent.  The interval is never narrower than the
   column's step over the span of the fit: 256 KiB for RSS (glibc gives
   memory back and takes it again in steps of that order), 16 bytes (a
   malloc chunk's granularity) for the heap, a byte for the DMA total.
   Nor narrower than the slope times the largest gap between samples
   (at least one iteration) over that span: each floor is placed at its
   range's centre, but it is the range's first sample when the curve
   rises steadily, which sits up to a gap after the range's edge; for a
   noisy column this scatter is in the residuals, for an exact one (the
   DMA total) it is not, and it moved a 1,000-byte-per-iteration slope by
   2% in a 48-iteration run.
6. **A steady rate.**  A leak raises the floor from one range to the next
   all along; a flat loop's floor may jump once or twice (glibc, a cache
   filling).  Growth is called steady only when the floor rises, by at least a
   quarter of what the slope predicts, in at least two thirds of the steps
   between the fitted ranges.  And settling slows
   down: when the last third of the ranges grows at less than half
   the rate of the middle third, and their two intervals (computed the
   same way) do not overlap, the growth is called slowing, not a leak.

The verdict (:attr:`Growth.verdict`):

- ``"flat"``: the interval's far end ``floor`` (``|slope| + half-width``)
  is at most ``resolution`` bytes per iteration (RSS: 4,096, a page;
  the malloc heap: 100): "flat
  (|slope| < Z, the floor of this run)".  Z is what this run can rule
  out, not zero: a leak smaller than Z may be there;
- ``"grows"``: otherwise, when the interval lies above zero and the rate
  is steady ("grows X ± Y bytes/iteration");
- ``"cannot tell"``: neither (too few samples, too short, too noisy, or
  growth that is slowing down): "cannot tell yet: run about N more
  iterations", N from the floor shrinking as the span to the power -1.5
  (a slope through noise of a fixed size sampled at a fixed rate; where
  the noise comes from long transients, longer ranges also lower the
  envelope's noise and the floor shrinks faster: N is an upper estimate).

Checked on 28 recorded runs of the simulator: planted leaks (malloc of 30
to 10,000 bytes per iteration, and leak_no_release) on digits_cnn and
mobilenet_v2, and flat runs of 50 to 10,000 iterations of digits_cnn,
mobilenet_v2 and yolov5s: no flat run was called growing, and no leak
larger than the floor its run stated was missed.  The tests
(tests/test_experiment_growth.py) repeat this on synthetic curves of
several leak sizes, lengths and kinds of noise, and on real runs: a
planted 100-byte leak in 10,000 iterations of digits_cnn, flat runs of
digits_cnn (10,000 iterations) and yolov5s (50).  The harness's own growth
was a few bytes per iteration, more on a loaded machine: glibc's per-thread
cache of freed chunks (tcache), which mallinfo2 counts as in use, filling
up as the run goes (up to 7 chunks of each of 64 sizes per thread).  The
harness now fills the variant's and its streaming thread's caches before
the measured loop (rknnlab.experiment.variants.fill_tcache), and the
harness alone leaves the heap flat to within 2 KiB over 10,000 iterations
(benchmarks/bench_floor.py, Python 3.9 and 3.11; it was +144 KiB), as with
the cache turned off.  Measured with both fixes, 10,000 iterations of
digits_cnn on the simulator, the 2-core test machine shared with other
jobs: flat floors 0.3 (3.9) and 0.003 (3.11) bytes/iteration; the planted
leak (a 112-byte chunk per iteration) 112 ± 2.7 and 111 ± 2.6.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

#: the envelope's ranges, and how many samples a range needs
BLOCKS = 12
MIN_PER_BLOCK = 2
#: Student's t, 97.5% quantile, by degrees of freedom
_T975 = {1: 12.71, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306,
         9: 2.262, 10: 2.228}

#: RSS: the step its floor takes in a flat run (glibc returns memory at the top
#: of the heap and in mmapped chunks, and takes it again, in steps of up to a
#: few hundred KiB), and the floor under which a run counts as flat: a page per
#: iteration, what RSS can resolve in a run of a few hundred iterations
RSS_STEP = 256.0 * 1024
RSS_RESOLUTION = 4096.0
#: the malloc heap counts bytes, in 16-byte chunks.  Its flat floor, 100 bytes
#: per iteration, is above the harness's own settling in the first seconds of a
#: run (up to 90 measured: mobilenet_v2, 1,000 iterations) and at or below the
#: smallest leak the tests plant (malloc(100) per iteration: 112-byte chunks)
HEAP_STEP = 16.0
HEAP_RESOLUTION = 100.0
#: the runtime's DMA total (the sum of total_dma_allocated_size over the live
#: contexts) is a count the runtime keeps, read after every call that can change
#: it: no sampling noise and no allocator slack, so its step is a byte and a
#: run counts as flat when the slope is within a byte per iteration (a flat
#: run's exact floors give |slope| < 1 / span)
DMA_STEP = 1.0
DMA_RESOLUTION = 1.0
#: a one-off jump of the floor (see _set_aside_jump): how far out of line
#: with the other steps between ranges, in their spreads and in column steps
JUMP_SPREADS = 8.0
JUMP_STEPS = 4.0
#: and how many ranges must follow it
JUMP_AFTER = 3


@dataclass
class Growth:
    """A memory column's growth per iteration over the measured loop."""
    #: "grows", "flat" or "cannot tell"
    verdict: str
    #: Theil-Sen slope after settling (bytes per iteration); NaN when not estimated
    slope: float = math.nan
    #: half-width of its 95% interval (bytes per iteration)
    half_width: float = math.nan
    #: the largest |slope| the run cannot rule out: |slope| + half_width
    floor: float = math.nan
    #: measured iterations this judgement used, and how many more would settle it
    iterations: int = 0
    more_iterations: Optional[int] = None
    #: why it could not tell
    reason: str = ""
    #: a one-off jump of the floor set aside by the fit (bytes; NaN: none), and
    #: about where (the measured iteration between the two ranges it separates)
    jump_bytes: float = math.nan
    jump_iteration: float = math.nan

    def words(self) -> str:
        """The verdict in words."""
        jump = ""
        if not math.isnan(self.jump_bytes):
            jump = (f"; a one-off jump of {self.jump_bytes / 1024:+,.0f} KiB near iteration "
                    f"{self.jump_iteration:,.0f} set aside")
        if self.verdict == "grows":
            return f"grows {_num(self.slope)} ± {_num(self.half_width)} bytes/iteration" + (
                f" ({jump[2:]})" if jump else "")
        if self.verdict == "flat":
            return (f"flat (|slope| < {_num(self.floor)} bytes/iteration, the floor of this "
                    f"run{jump})")
        more = (f": run about {self.more_iterations:,} more iterations"
                if self.more_iterations else "")
        why = f" ({self.reason}{jump})" if self.reason else (f" ({jump[2:]})" if jump else "")
        return f"cannot tell yet{more}{why}"


def _num(x: float) -> str:
    a = abs(x)
    if a >= 100:
        return f"{x:,.0f}"
    if a >= 10:
        return f"{x:.0f}"
    if a >= 1:
        return f"{x:.1f}"
    return f"{x:.2g}"


def theil_sen(x: np.ndarray, y: np.ndarray) -> float:
    """The median of the slopes between every pair of points."""
    i, j = np.triu_indices(len(x), 1)
    dx = x[j] - x[i]
    ok = dx != 0
    return float(np.median((y[j] - y[i])[ok] / dx[ok])) if ok.any() else math.nan


def _envelope(x: np.ndarray, y: np.ndarray, blocks: int):
    edges = np.linspace(x.min(), x.max() + 1e-9, blocks + 1)
    idx = np.clip(np.searchsorted(edges, x, side="right") - 1, 0, blocks - 1)
    counts = np.bincount(idx, minlength=blocks)
    floors = np.full(blocks, np.inf)
    np.minimum.at(floors, idx, y)
    centers = (edges[:-1] + edges[1:]) / 2
    return centers, floors, counts


def _slope_ci(x: np.ndarray, y: np.ndarray, fitted: int = 2):
    """Theil-Sen slope and its 95% half-width; ``fitted``: the parameters the
    floors were fitted with (2 for the line, plus one per step of a jump set aside)."""
    b = theil_sen(x, y)
    a = float(np.median(y - b * x))
    r = y - (a + b * x)
    m = len(x)
    sxx = float(((x - x.mean()) ** 2).sum())
    dof = m - fitted
    se = math.sqrt(float((r ** 2).sum()) / dof / sxx) if sxx > 0 and dof > 0 else math.inf
    rho = 0.0
    if m > 3 and float((r ** 2).sum()) > 0:
        rho = float((r[1:] * r[:-1]).sum() / (r ** 2).sum())
    rho = min(max(rho, 0.0), 0.8)
    se *= math.sqrt((1 + rho) / (1 - rho))
    return b, _T975.get(dof, 2.0) * se


def _set_aside_jump(x: np.ndarray, y: np.ndarray, step: float, resolution: float):
    """``(floors, (size, where), steps)``: the floors with one jump set aside, its size
    and place, and the steps between ranges it took (1 or 2); ``(y, None, 0)`` when
    there is none.

    A jump is one rise between neighbouring ranges that stands out from the
    other steps between them: above the median step by more than
    ``JUMP_SPREADS`` times their spread (1.4826 x their median absolute
    deviation from the median step), more than ``JUMP_STEPS`` column steps,
    more than the median step itself, and more than ``resolution`` bytes per
    iteration over a range (a smaller one cannot move the verdict).  A jump
    inside a range can show as two such rises in a row (a sample of that range caught between the two
    levels); both are then the one jump.  The floors after it are moved back
    by its excess over the median step, so the slope is that of the other
    steps.  Only a rise (memory taken once and kept: a cache or an
    interpreter table reaching its working size): setting a fall aside could
    only make a run look as if it grew.  Only one: a floor that jumps again
    and again is neither flat nor a steady rate.  And only with at least
    ``JUMP_AFTER`` ranges after it: that the floor stays level after a jump
    is what makes it one-off, not a change of rate at the end of the run."""
    d = np.diff(y)
    if len(d) < 5:
        return y, None, 0
    med = float(np.median(d))
    dev = d - med
    k = int(np.argmax(dev))
    j = max((i for i in (k - 1, k + 1) if 0 <= i < len(d)), key=lambda i: dev[i])
    spread = 1.4826 * float(np.median(np.abs(np.delete(dev, [k, j]))))
    limit = max(JUMP_SPREADS * spread, JUMP_STEPS * step, abs(med),
                resolution * float(np.median(np.diff(x))))
    parts = sorted([k, j] if dev[j] > limit else [k])
    if dev[k] <= limit or len(y) - (parts[-1] + 1) < JUMP_AFTER:
        return y, None, 0
    out = y.copy()
    for i in parts:
        out[i + 1:] -= dev[i]
    return out, (float(dev[parts].sum()), float((x[parts[0]] + x[parts[-1] + 1]) / 2)), len(parts)


def growth(iteration: Sequence[float], values: Sequence[float], step: float = RSS_STEP,
           resolution: float = RSS_RESOLUTION, blocks: int = BLOCKS) -> Growth:
    """Judge whether ``values`` (bytes) grow with ``iteration`` (see the module
    docstring for the method).  ``step``: the column's resolution in bytes
    (RSS_STEP for RSS, HEAP_STEP for the heap, DMA_STEP for the DMA total);
    ``resolution``: the floor, in bytes per iteration, under which a run
    counts as flat (RSS_RESOLUTION, HEAP_RESOLUTION, DMA_RESOLUTION)."""
    x = np.asarray(iteration, float)
    y = np.asarray(values, float)
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok], y[ok]
    if len(x) == 0:
        return Growth("cannot tell", reason="no samples in the measured loop")
    span = float(x.max() - x.min())
    n_its = int(round(span)) + 1
    if span < blocks or len(x) < blocks * MIN_PER_BLOCK:
        per_iteration = len(x) / n_its  # samples come at a rate in time, not per iteration
        need = max(blocks * MIN_PER_BLOCK / max(per_iteration, 1e-9), blocks * 10)
        return Growth("cannot tell", iterations=n_its, more_iterations=_nice(need - n_its),
                      reason=f"{len(x)} samples over {n_its} iterations: too few to fit a slope")
    centers, floors, counts = _envelope(x, y, blocks)
    keep = np.arange(blocks) >= blocks // 3
    keep &= counts >= 1
    xs, ys = centers[keep], floors[keep]
    if len(xs) < 4:
        return Growth("cannot tell", iterations=n_its, more_iterations=_nice(n_its),
                      reason="too few samples after settling")
    ys, jump, jump_parts = _set_aside_jump(xs, ys, step, resolution)
    floors = floors.copy()
    floors[keep] = ys
    b, h = _slope_ci(xs, ys, fitted=2 + jump_parts)
    fit_span = float(xs.max() - xs.min()) or 1.0
    in_fit = np.unique(x[(x >= xs.min()) & (x <= xs.max())])
    gap = max(1.0, float(np.diff(in_fit).max())) if len(in_fit) > 1 else 1.0
    h = max(h, step / fit_span, abs(b) * gap / fit_span)
    floor = abs(b) + h
    g = Growth("flat", slope=b, half_width=h, floor=floor, iterations=n_its)
    if jump:
        g.jump_bytes, g.jump_iteration = jump
    third = blocks // 3
    mid = keep & (np.arange(blocks) < 2 * third)
    last = keep & (np.arange(blocks) >= 2 * third)
    if floor <= resolution:
        return g
    if b - h > 0:
        # a step counts as a rise when it carries at least a quarter of what the
        # slope predicts for it: a steady leak rises by about that at every step
        rises = float((np.diff(ys) > 0.25 * b * np.diff(xs)).mean())
        if rises < 2 / 3:
            g.verdict = "cannot tell"
            g.reason = (f"the lower envelope rose in {rises:.0%} of the steps between ranges: a step or two, "
                        "not a steady rate")
            g.more_iterations = _nice(2 * n_its)
            return g
        if mid.sum() >= 3 and last.sum() >= 3:
            b_mid, h_mid = _slope_ci(centers[mid], floors[mid])
            b_last, h_last = _slope_ci(centers[last], floors[last])
            third_span = float(np.ptp(centers[last])) or 1.0  # the same step floor as above
            h_mid, h_last = max(h_mid, step / third_span), max(h_last, step / third_span)
            if b_last < 0.5 * b_mid and b_last + h_last < b_mid - h_mid:
                g.verdict = "cannot tell"
                g.reason = (f"growing, but slowing down: {_num(b_mid)} then {_num(b_last)} "
                            "bytes/iteration; settling or a leak")
                g.more_iterations = _nice(2 * n_its)
                return g
        g.verdict = "grows"
        return g
    g.verdict = "cannot tell"
    # the floor of a least-squares slope through noise of a given size, sampled at a
    # given rate, shrinks as span^-1.5: the span that brings it down to resolution
    need = n_its * (floor / resolution) ** (2 / 3)
    g.more_iterations = _nice(need - n_its)
    g.reason = f"this run can only tell that |slope| < {_num(floor)} bytes/iteration"
    return g


def _nice(n: float) -> int:
    """Round up to 1, 2 or 5 times a power of ten."""
    n = max(float(n), 1.0)
    p = 10 ** math.floor(math.log10(n))
    for k in (1, 2, 5, 10):
        if k * p >= n:
            return int(k * p)
    return int(10 * p)
