"""Is one variant faster than another?  A ratio of medians, its uncertainty, and a verdict.

``compare(name, times, base, base_times)`` judges two series of times per
iteration (ms, in the order they ran: the measured loop of each variant, or
the time each iteration spent in one phase).  The method, and why:

1. **Ratio of medians.**  The estimate is the median of ``times`` over the
   median of ``base_times``: medians, because an iteration that another
   process interrupted takes many times as long, and one such spike would
   move a mean.
2. **Parts.**  Each series is cut into ``BLOCKS`` (10) consecutive parts
   of equal length, each represented by its median.  Neighbouring
   iterations are not independent (a background job slows a run down for a
   while, not for one iteration); parts of a run are closer to independent,
   and their medians vary as much as the run's conditions did.
3. **Uncertainty from the run's own noise.**  The 95% interval of the ratio
   is ``exp(log ratio ± t * se)``, ``se`` the standard error of the
   difference of the mean log part medians of the two series (Welch: each
   with its own variance), each variance inflated by ``(1 + r) / (1 - r)``,
   ``r`` the lag-1 autocorrelation of that series' log part medians
   (clipped to 0..0.8: a slow stretch that outlasts a part makes
   neighbouring parts alike), ``t`` Student's 97.5% quantile at the
   Welch-Satterthwaite degrees of freedom.
4. **Not within the noise between runs.**  The harness runs the variants
   one after the other, each in its own process, so the two series were
   measured under conditions that may differ as a whole: another job
   started, the CPU clock changed, the process landed on other cores or
   memory.  No interval computed within the runs covers that.  Two rules
   stand for it.  The ratio must be further from 1 than the spread of
   either run's part medians (its slowest part's median over its
   fastest's): what a run shows of changing conditions.  And it must be
   beyond ``BETWEEN_RUNS`` (1.10x): 46 pairs of runs of one variant
   (prealloc_output on mobilenet_v2, 200 or 300 iterations, the simulator
   on 2 CPU cores shared with other jobs) had medians up to 1.06x apart
   with both runs steady (parts within 1.10x of each other), 1.11x with
   one disturbed, and intervals from step 3 that excluded 1 in about a
   third of them: the difference between processes is real and steady
   within a run, so only a second run shows it.

The verdict (:attr:`Comparison.verdict`):

- ``"slower"`` / ``"faster"``: the interval excludes 1 and the ratio is
  beyond both runs' spread and beyond 1.10x either way: "1.21x the time
  per iteration (95% interval 1.19–1.23): slower";
- ``"cannot tell apart"``: otherwise, with the reason: the interval
  includes 1; or the ratio is within 1.10x; or within the runs' own
  noise ("the medians of X's 10 consecutive parts differ by up to
  1.15x"); or fewer than ``MIN_ITERATIONS`` (100) iterations in a series
  (parts of fewer than 10 iterations say little about conditions that
  last longer); or a median of 0 (a phase called in fewer than half of
  the iterations).

The price of step 4 is power: a real difference under 10%, or smaller
than a run's own spread, is never called from one run of each variant;
to compare smaller differences, run the variants again (in another order)
and see whether the ratio holds.  Checked as above; the tests
(tests/test_experiment_timing.py) repeat this on synthetic series
(lognormal noise, spikes, drift, correlated stretches, load that changes
during one run) over many random seeds, and on real simulator runs: the
same variant twice is never told apart, and an extra sleep of 20% of an
iteration is called slower.  On a quiet board, runs may agree more
closely than 1.10x; the rule stays, so that a verdict means the same
everywhere.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

#: parts per series, and the iterations a part needs at least
BLOCKS = 10
MIN_PER_BLOCK = 10
MIN_ITERATIONS = BLOCKS * MIN_PER_BLOCK
#: the largest ratio two runs of the same variant are taken to differ by (see step 4)
BETWEEN_RUNS = 1.10
#: Student's t, 97.5% quantile, by degrees of freedom (beyond 120: 120's, a little wide)
_T975 = {1: 12.71, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306,
         9: 2.262, 10: 2.228, 11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 16: 2.120,
         17: 2.110, 18: 2.101, 19: 2.093, 20: 2.086, 22: 2.074, 24: 2.064, 26: 2.056,
         28: 2.048, 30: 2.042, 40: 2.021, 60: 2.000, 120: 1.980}


def _t975(df: float) -> float:
    """The quantile at the largest tabulated df not above ``df`` (conservative)."""
    below = [k for k in _T975 if k <= df]
    return _T975[max(below)] if below else _T975[1]


@dataclass
class Comparison:
    """``name``'s time per iteration against ``base``'s."""
    name: str
    base: str
    #: "slower", "faster" or "cannot tell apart"
    verdict: str
    #: median of name's times over median of base's; NaN when not estimated
    ratio: float = math.nan
    #: the ratio's 95% interval
    low: float = math.nan
    high: float = math.nan
    #: why it cannot tell them apart
    reason: str = ""

    def _digits(self) -> int:
        return 3 if self.high - self.low < 0.02 else 2

    def interval(self) -> str:
        """"95% interval 1.19–1.23" ("" when not estimated)."""
        if math.isnan(self.low):
            return ""
        d = self._digits()
        return f"95% interval {self.low:.{d}f}–{self.high:.{d}f}"

    def words(self, what: str = "the time per iteration") -> str:
        """The verdict in words, e.g. "1.21x the time per iteration (95% interval
        1.19–1.23): slower"."""
        if math.isnan(self.ratio):
            text = f"no ratio of {what}"
        else:
            d = 2 if math.isnan(self.low) else self._digits()
            text = f"{self.ratio:.{d}f}x {what}"
            if self.interval():
                text += f" ({self.interval()})"
        text += f": {self.verdict}"
        return text + (f" ({self.reason})" if self.reason else "")


def _parts(x: np.ndarray) -> np.ndarray:
    """The medians of BLOCKS consecutive parts of equal length (the last iterations
    that do not fill a part are left out)."""
    size = len(x) // BLOCKS
    return np.median(x[:BLOCKS * size].reshape(BLOCKS, size), axis=1)


def _variance_of_mean(v: np.ndarray) -> float:
    """The variance of the mean of ``v`` (the log part medians of one run), inflated by
    ``(1 + r) / (1 - r)``, ``r`` their lag-1 autocorrelation clipped to 0..0.8: a slow
    stretch of a run that outlasts a part makes neighbouring parts alike."""
    d = v - v.mean()
    ss = float((d ** 2).sum())
    r = float((d[1:] * d[:-1]).sum() / ss) if ss > 0 else 0.0
    r = min(max(r, 0.0), 0.8)
    return ss / (len(v) - 1) / len(v) * (1 + r) / (1 - r)


def compare(name: str, times: Sequence[float], base: str, base_times: Sequence[float]
            ) -> Comparison:
    """Judge whether ``times`` (ms per iteration, in run order) are slower or
    faster than ``base_times`` (see the module docstring for the method)."""
    x = np.asarray(times, float)
    y = np.asarray(base_times, float)
    x, y = x[np.isfinite(x)], y[np.isfinite(y)]
    fewest = min(len(x), len(y))
    if fewest < MIN_ITERATIONS:
        ratio = float(np.median(x) / np.median(y)) if fewest and np.median(y) > 0 else math.nan
        return Comparison(name, base, "cannot tell apart", ratio=ratio,
                          reason=f"{fewest} measured iterations; comparing needs at least "
                                 f"{MIN_ITERATIONS}")
    mx, my = float(np.median(x)), float(np.median(y))
    px, py = _parts(x), _parts(y)
    if mx <= 0 or my <= 0 or px.min() <= 0 or py.min() <= 0:
        return Comparison(name, base, "cannot tell apart",
                          reason="a median of 0 ms: called in fewer than half of the iterations")
    log_ratio = math.log(mx / my)
    lx, ly = np.log(px), np.log(py)
    vx, vy = _variance_of_mean(lx), _variance_of_mean(ly)
    se = math.sqrt(vx + vy)
    if se > 0:
        df = (vx + vy) ** 2 / ((vx ** 2 / (len(lx) - 1) if vx else 0.0)
                               + (vy ** 2 / (len(ly) - 1) if vy else 0.0))
    else:
        df = math.inf
    h = _t975(df) * se
    spread_x, spread_y = float(np.ptp(lx)), float(np.ptp(ly))
    c = Comparison(name, base, "cannot tell apart", ratio=math.exp(log_ratio),
                   low=math.exp(log_ratio - h), high=math.exp(log_ratio + h))
    if c.low <= 1 <= c.high:
        c.reason = "the interval includes 1"
    elif abs(log_ratio) <= math.log(BETWEEN_RUNS):
        c.reason = (f"within {BETWEEN_RUNS:.2f}x: two runs of the same variant, in separate "
                    "processes, can differ by that much")
    elif abs(log_ratio) <= max(spread_x, spread_y):
        wider, spread = (name, spread_x) if spread_x >= spread_y else (base, spread_y)
        c.reason = (f"within the runs' own noise: the medians of {wider}'s {len(px)} consecutive "
                    f"parts differ by up to {math.exp(spread):.2f}x")
    else:
        c.verdict = "slower" if c.ratio > 1 else "faster"
    return c
