"""What ``rknnlab.run`` returns: the raw columns of each variant's run, and
tidy pandas DataFrames made from them on demand.

=============  ================================================================
frame          one row per
=============  ================================================================
``calls``      runtime call: variant, function (the phase), stage, iteration,
               start_s, duration_us, bytes, thread, ctx, core_mask (the
               context's last rknn_set_core_mask; 0 = AUTO), ok
``iterations`` loop iteration: variant, iteration, stage, start_s, duration_ms
``samples``    memory sample: variant, t_s, iteration, stage, mem_free_kb, ...,
               rss_kb, pss_kb, heap_*_bytes, dma_bytes (npu_* on a board)
``phases``     variant x function over the measured iterations: calls,
               median_us, p95_us, mean_us, total_ms, bytes_per_call
``summary``    variant: status, iterations, iter_median_ms, iter_p95_ms,
               iters_per_s, memfree_drop_kb, rss_slope_kb_per_1k_iter,
               rss_peak_kb, pss_peak_kb, heap_in_use_growth_bytes (last - first
               measured sample), heap_growth_per_iter_bytes (slope of the
               heap's lower envelope, see floor_slope), dma_peak_bytes,
               rss_growth / heap_growth / dma_growth (the verdict in
               words, see rknnlab.experiment.growth; dma: the runtime's DMA
               total, exact, so its verdict needs no margin for noise),
               rss_verdict / heap_verdict / dma_verdict ("grows", "flat",
               "cannot tell"), rss_slope_bytes_per_iter /
               heap_slope_bytes_per_iter / dma_slope_bytes_per_iter and their
               95% half-widths rss_slope_pm_bytes / heap_slope_pm_bytes /
               dma_slope_pm_bytes (after settling), rss_samples /
               heap_samples / dma_samples (readings in the measured loop),
               and <function>_median_us / <function>_p95_us per phase
=============  ================================================================

Stages: "setup" (before the loop), "warmup", "measure", "teardown".  The
summary uses the measured iterations only.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

import numpy as np

from .growth import (DMA_RESOLUTION, DMA_STEP, HEAP_RESOLUTION, HEAP_STEP, RSS_RESOLUTION,
                     RSS_STEP, Growth, growth)
from .timing import compare

STATUSES = ("ok", "error", "crashed", "timeout", "skipped")


@dataclass
class VariantRun:
    """One variant's run, as columns (JSON-ready)."""
    name: str
    status: str = "error"
    error: Optional[str] = None
    traceback: Optional[str] = None
    doc: str = ""
    source: str = ""
    returncode: Optional[int] = None
    wall_s: float = 0.0
    stdout: str = ""
    stderr: str = ""
    backend: Optional[str] = None
    sdk: Dict[str, str] = field(default_factory=dict)
    #: the RKNNLite the variant used: "simulated" (rknnlab.lite), "wheel" (Rockchip's), None
    rknnlite: Optional[str] = None
    probe: Optional[Dict[str, Any]] = None
    calls: Dict[str, list] = field(default_factory=dict)
    iterations: Dict[str, list] = field(default_factory=dict)
    samples: Dict[str, list] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_dict(self) -> Dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "VariantRun":
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


#: the rknn-toolkit-lite2 release rknnlab.lite models (rknnlab.lite.LITE_VERSION; not imported
#: here so that reading a trace does not load the simulator)
_LITE_VERSION = "2.5.0"


def _median(x: "np.ndarray") -> float:
    return float(np.median(x)) if len(x) else math.nan


def _p95(x: "np.ndarray") -> float:
    return float(np.percentile(x, 95)) if len(x) else math.nan


def rss_slope_per_1k(iteration: "np.ndarray", rss_kb: "np.ndarray") -> float:
    """Least-squares slope of RSS (kB; or any memory column) against the
    iteration number, times 1,000."""
    ok = ~(np.isnan(iteration) | np.isnan(rss_kb))
    if ok.sum() < 2 or np.ptp(iteration[ok]) == 0:
        return math.nan
    return float(np.polyfit(iteration[ok], rss_kb[ok], 1)[0] * 1000)


def floor_slope(iteration: "np.ndarray", values: "np.ndarray", bins: int = 8) -> float:
    """Slope (per iteration) of the lower envelope of ``values``: the minimum in
    each of ``bins`` equal iteration ranges, fitted by least squares.

    For the heap in use: transient buffers (a conversion's temporary) make
    samples jump up and down by hundreds of kB depending on when they land,
    while a leak raises the floor.  The envelope ignores the first and keeps
    the second."""
    ok = ~(np.isnan(iteration) | np.isnan(values))
    x, y = iteration[ok], values[ok]
    if len(x) < 2 or np.ptp(x) == 0:
        return math.nan
    bins = max(2, min(bins, len(x) // 3))
    edges = np.linspace(x.min(), x.max(), bins + 1)
    xs, ys = [], []
    for lo, hi in zip(edges[:-1], edges[1:]):
        m = (x >= lo) & (x <= hi)
        if m.any():
            j = np.argmin(np.where(m, y, np.inf))
            xs.append(x[j])
            ys.append(y[j])
    if len(xs) < 2 or np.ptp(xs) == 0:
        return math.nan
    return float(np.polyfit(xs, ys, 1)[0])


class Result:
    """The variants' runs plus the run's metadata (``meta``: backend, source,
    board, runtime versions, model, host, parameters)."""

    def __init__(self, meta: Dict[str, Any], runs: List[VariantRun]) -> None:
        self.meta = meta
        self.runs = runs
        self._cache: Dict[str, Any] = {}

    # ------------------------------------------------------------------ access
    @property
    def source(self) -> str:
        """Where the numbers come from, e.g. "simulated RK3588 — rknnlab sim"."""
        return self.meta.get("source", "unknown source")

    @property
    def variants(self) -> List[str]:
        return [r.name for r in self.runs]

    def __getitem__(self, name: str) -> VariantRun:
        for r in self.runs:
            if r.name == name:
                return r
        raise KeyError(f"no variant {name!r} in this result; it has {', '.join(self.variants)}")

    @property
    def errors(self) -> Dict[str, str]:
        """variant -> error message, for the variants that did not finish."""
        return {r.name: f"{r.status}: {r.error}" for r in self.runs if r.status != "ok"}

    # ------------------------------------------------------------------ frames
    def _frame(self, key: str):
        if key in self._cache:
            return self._cache[key]
        import pandas as pd
        parts = []
        for r in self.runs:
            cols = getattr(r, key)
            if not cols:
                continue
            n = min(len(v) for v in cols.values())
            if n == 0:
                continue
            df = pd.DataFrame({k: v[:n] for k, v in cols.items()})
            df.insert(0, "variant", r.name)
            parts.append(df)
        if parts:
            df = pd.concat(parts, ignore_index=True)
        else:
            df = pd.DataFrame({"variant": pd.Series(dtype=object)})
        df["variant"] = pd.Categorical(df["variant"], categories=self.variants)
        self._cache[key] = df
        return df

    @property
    def calls(self):
        """One row per runtime call (see the module docstring)."""
        if "calls_t" not in self._cache:
            import pandas as pd
            df = self._frame("calls").copy()
            if "t_start_ns" in df:
                df["iteration"] = df["iteration"].astype("Int64")
                df["start_s"] = df.pop("t_start_ns") / 1e9
                df["duration_us"] = df.pop("duration_ns") / 1e3
                df["bytes"] = pd.to_numeric(df["bytes"]).astype("Int64")
                df["ctx"] = pd.to_numeric(df["ctx"]).astype("Int64")
                df["thread"] = pd.to_numeric(df["thread"]).astype("Int64")
                if "core_mask" in df:
                    df["core_mask"] = pd.to_numeric(df["core_mask"]).astype("Int64")
                df["ok"] = df["ok"].astype(bool)
            self._cache["calls_t"] = df
        return self._cache["calls_t"]

    @property
    def iterations(self):
        """One row per loop iteration."""
        if "iterations_t" not in self._cache:
            df = self._frame("iterations").copy()
            if "t_start_ns" in df:
                df["iteration"] = df["iteration"].astype(int)
                df["start_s"] = df.pop("t_start_ns") / 1e9
                df["duration_ms"] = df.pop("duration_ns") / 1e6
            self._cache["iterations_t"] = df
        return self._cache["iterations_t"]

    @property
    def samples(self):
        """One row per memory sample; kB as /proc gives them, bytes for heap and DMA."""
        if "samples_t" not in self._cache:
            import pandas as pd
            df = self._frame("samples").copy()
            if "t_ns" in df:
                df.insert(1, "t_s", df.pop("t_ns") / 1e9)
                df["iteration"] = pd.to_numeric(df["iteration"]).astype("Int64")
                for c in df.columns:
                    if c.endswith(("_kb", "_bytes", "_pct", "_hz")):
                        df[c] = pd.to_numeric(df[c]).astype(float)
            self._cache["samples_t"] = df
        return self._cache["samples_t"]

    @property
    def phases(self):
        """variant x function over the measured iterations."""
        if "phases" not in self._cache:
            import pandas as pd
            calls = self.calls
            rows = []
            if len(calls) and "stage" in calls:
                m = calls[calls["stage"] == "measure"]
                for (v, fn), g in m.groupby(["variant", "function"], observed=True, sort=False):
                    d = g["duration_us"].to_numpy(float)
                    b = g["bytes"].dropna()
                    rows.append({"variant": v, "function": fn, "calls": len(g),
                                 "median_us": _median(d), "p95_us": _p95(d),
                                 "mean_us": float(d.mean()), "total_ms": float(d.sum() / 1e3),
                                 "bytes_per_call": float(b.mean()) if len(b) else math.nan})
            df = pd.DataFrame(rows, columns=["variant", "function", "calls", "median_us", "p95_us",
                                             "mean_us", "total_ms", "bytes_per_call"])
            self._cache["phases"] = df
        return self._cache["phases"]

    @property
    def summary(self):
        """One row per variant (see the module docstring for the columns)."""
        if "summary" in self._cache:
            return self._cache["summary"]
        import pandas as pd
        its, smp, ph = self.iterations, self.samples, self.phases
        rows = []
        for r in self.runs:
            row: Dict[str, Any] = {"variant": r.name, "status": r.status}
            it = its[(its["variant"] == r.name) & (its["stage"] == "measure")] if "stage" in its else its.iloc[:0]
            d = it["duration_ms"].to_numpy(float) if len(it) else np.array([])
            row["iterations"] = len(it)
            row["iter_median_ms"] = _median(d)
            row["iter_p95_ms"] = _p95(d)
            if len(it):
                span = (it["start_s"].iloc[-1] + it["duration_ms"].iloc[-1] / 1e3) - it["start_s"].iloc[0]
                row["iters_per_s"] = len(it) / span if span > 0 else math.nan
            else:
                row["iters_per_s"] = math.nan
            s = smp[smp["variant"] == r.name] if "variant" in smp else smp
            sm = s[s["stage"] == "measure"] if "stage" in s else s.iloc[:0]
            def col(name: str):
                return sm[name].dropna() if name in sm else sm.iloc[:0, :0]
            mf = col("mem_free_kb")
            row["memfree_drop_kb"] = float(mf.iloc[0] - mf.iloc[-1]) if len(mf) >= 2 else math.nan
            rss = col("rss_kb")
            row["rss_start_kb"] = float(rss.iloc[0]) if len(rss) else math.nan
            row["rss_slope_kb_per_1k_iter"] = (
                rss_slope_per_1k(sm["iteration"].to_numpy(float, na_value=np.nan),
                                 sm["rss_kb"].to_numpy(float)) if len(rss) else math.nan)
            row["rss_peak_kb"] = float(s["rss_kb"].max()) if len(s) and "rss_kb" in s else math.nan
            row["pss_peak_kb"] = float(s["pss_kb"].max()) if len(s) and "pss_kb" in s else math.nan
            heap = col("heap_in_use_bytes")
            row["rss_samples"] = len(rss)
            row["heap_samples"] = len(heap)
            row["dma_samples"] = len(col("dma_bytes"))
            if len(heap) >= 2:
                row["heap_in_use_growth_bytes"] = float(heap.iloc[-1] - heap.iloc[0])
                row["heap_growth_per_iter_bytes"] = floor_slope(
                    sm["iteration"].to_numpy(float, na_value=np.nan),
                    sm["heap_in_use_bytes"].to_numpy(float))
            else:
                row["heap_in_use_growth_bytes"] = math.nan
                row["heap_growth_per_iter_bytes"] = math.nan
            it_col = sm["iteration"].to_numpy(float, na_value=np.nan) if len(sm) else np.array([])
            for key, column, scale, step, res in (
                    ("rss", "rss_kb", 1024.0, RSS_STEP, RSS_RESOLUTION),
                    ("heap", "heap_in_use_bytes", 1.0, HEAP_STEP, HEAP_RESOLUTION),
                    ("dma", "dma_bytes", 1.0, DMA_STEP, DMA_RESOLUTION)):
                if column in sm and len(sm) and sm[column].notna().any():
                    g = growth(it_col, sm[column].to_numpy(float) * scale, step, res)
                else:
                    g = Growth("cannot tell", reason="not sampled")
                row[f"{key}_growth"] = g.words()
                row[f"{key}_verdict"] = g.verdict
                row[f"{key}_slope_bytes_per_iter"] = g.slope
                row[f"{key}_slope_pm_bytes"] = g.half_width
            row["dma_peak_bytes"] = (float(s["dma_bytes"].max()) if len(s) and "dma_bytes" in s
                                     and s["dma_bytes"].notna().any() else math.nan)
            row["wall_s"] = r.wall_s
            for _, p in ph[ph["variant"] == r.name].iterrows():
                row[f"{p['function']}_median_us"] = p["median_us"]
                row[f"{p['function']}_p95_us"] = p["p95_us"]
            row["error"] = r.error
            rows.append(row)
        df = pd.DataFrame(rows).set_index("variant")
        self._cache["summary"] = df
        return df

    # ------------------------------------------------------------------ words
    def describe(self) -> str:
        """What changed between the variants, in words.

        Time: every comparison is the ratio of two medians of the time per
        iteration (or of the time an iteration spent in one phase) with its
        95% interval, and a verdict: "slower", "faster" or "cannot tell
        apart".  The interval comes from the medians of ten consecutive parts
        of each variant's measured loop (Welch's t on their logarithms).  A
        difference counts only when the interval excludes 1, the ratio is
        beyond 1.10x either way, and it is further from 1 than either
        run's parts are from each other: the variants run one after the
        other, each in its own process, and two runs of the same variant
        differ as a whole by up to about 6% on the simulator, which no
        interval within the runs can see.  Fewer than 100 measured
        iterations: cannot tell apart (rknnlab.experiment.timing describes
        the method and its measurements).  Each
        variant after the first is compared with the first: its time per
        iteration, and the phase whose median changed most (that phase is
        picked by the size of its change, so read its verdict with that in
        mind); with three variants or more, the slowest with the fastest.

        Memory: for the malloc heap in use and RSS, "grows X ± Y
        bytes/iteration" (a 95% interval), "flat (|slope| < Z, the floor of
        this run)" or "cannot tell yet: run about N more iterations", from
        the slope of the lower envelope after settling and its uncertainty
        from the run's own noise (rknnlab.experiment.growth describes the
        method).  The runtime's DMA total (the sum of
        total_dma_allocated_size over the live contexts) is judged the same
        way and named where it grows; it is exact, so a run of a few dozen
        iterations settles it.  The harness's own growth in the measured process is below
        a byte per iteration: with no model at all (0.5 ms iterations) the
        heap in use moves by 2 KiB over 10,000 iterations on Python 3.9 and
        3.11 (benchmarks/bench_floor.py).  Glibc's per-thread caches of freed
        chunks, which mallinfo2 counts as in use and which used to fill up
        during the loop (+144 KiB), are filled before it
        (rknnlab.experiment.variants.fill_tcache).  A one-off rise of the
        heap after settling (an interpreter or library table reaching its
        size) is set aside and named in the verdict."""
        s = self.summary
        p = self.meta.get("parameters", {})
        lines = [f"{len(self.runs)} variant(s) on {self.meta.get('model', {}).get('name', '?')}, "
                 f"{p.get('iterations', '?')} measured iterations after {p.get('warmup', '?')} warm-up, "
                 f"{self.source}."]
        ok = s[s["status"] == "ok"]
        for name, row in s.iterrows():
            if row["status"] != "ok":
                lines.append(f"- {name}: {row['status'].upper()} — {row['error']}")
                continue
            if math.isnan(row["rss_slope_kb_per_1k_iter"]):
                mem = "memory not sampled"
            else:
                mem = f"malloc heap in use: {row['heap_growth']}; RSS: {row['rss_growth']}"
            if row.get("dma_verdict") == "grows":
                mem += f"; runtime DMA total: {row['dma_growth']}"
            phases = self.phases[self.phases["variant"] == name].sort_values("median_us", ascending=False)
            top = ", ".join(f"{f['function']} {f['median_us']:.0f} us" for _, f in phases.head(3).iterrows())
            dma = row["dma_peak_bytes"]
            dma_s = f"; DMA {dma / 2**20:.1f} MiB" if not math.isnan(dma) else ""
            lines.append(f"- {name}: {row['iter_median_ms']:.2f} ms per iteration (median; p95 "
                         f"{row['iter_p95_ms']:.2f}), {row['iters_per_s']:.0f} iterations/s over the whole loop; {mem}; "
                         f"peak RSS {row['rss_peak_kb'] / 1024:.1f} MiB{dma_s}. Slowest phases: {top}.")
        simulated_lite = [r.name for r in self.runs if r.rknnlite == "simulated"]
        if simulated_lite:
            lines.append(f"RKNNLite in {', '.join(simulated_lite)}: the simulator's model of rknn-toolkit-lite2 "
                         f"{_LITE_VERSION} (rknnlab.lite, ASSUMPTIONS A65-A71); it leaves no reference cycle "
                         "per inference() (A71).")
        if len(ok) >= 2:
            lines.extend(self._against_baseline(ok))
        if len(ok) >= 3:
            fastest = ok["iter_median_ms"].idxmin()
            slowest = ok["iter_median_ms"].idxmax()
            c = compare(slowest, self._iteration_times(slowest), fastest, self._iteration_times(fastest))
            lines.append(f"Slowest against fastest (by median): {slowest} vs {fastest}: {c.words()}.")
        lines.extend(self._memory_verdicts(ok))
        return "\n".join(lines)

    def _iteration_times(self, name: str) -> "np.ndarray":
        """``name``'s measured iterations' durations (ms), in the order they ran."""
        its = self.iterations
        if "stage" not in its:
            return np.array([])
        it = its[(its["variant"] == name) & (its["stage"] == "measure")].sort_values("iteration")
        return it["duration_ms"].to_numpy(float)

    def _phase_times(self, name: str):
        """iteration x function: the time (ms) each measured iteration of ``name``
        spent in each phase (0 where it made no such call), in run order."""
        key = f"phase_times:{name}"
        if key not in self._cache:
            import pandas as pd
            calls = self.calls
            if not len(calls) or "stage" not in calls:
                table = pd.DataFrame()
            else:
                m = calls[(calls["variant"] == name) & (calls["stage"] == "measure")]
                table = (m.groupby(["iteration", "function"], observed=True)["duration_us"].sum()
                         .unstack("function", fill_value=0.0) / 1e3)
                its = self.iterations
                measured = its[(its["variant"] == name) & (its["stage"] == "measure")]["iteration"]
                table = table.reindex(sorted(measured), fill_value=0.0)
            self._cache[key] = table
        return self._cache[key]

    def _against_baseline(self, ok) -> List[str]:
        """One line per variant: its time per iteration against the first one's, and
        the phase whose median time per iteration changed most, each with its
        verdict (see describe)."""
        base = ok.index[0]
        out = []
        for name in ok.index[1:]:
            c = compare(name, self._iteration_times(name), base, self._iteration_times(base))
            out.append(f"{name} vs {base}: {c.words()}{self._phase_change(name, base)}.")
        return out

    def _phase_change(self, name: str, base: str) -> str:
        """"; the biggest change in a phase: ..." for ``name`` against ``base``."""
        a, b = self._phase_times(base), self._phase_times(name)
        fns = list(dict.fromkeys(list(a.columns) + list(b.columns)))
        if not fns:
            return ""
        med_a = {fn: float(a[fn].median()) if fn in a else 0.0 for fn in fns}
        med_b = {fn: float(b[fn].median()) if fn in b else 0.0 for fn in fns}
        fn = max(fns, key=lambda f: abs(med_b[f] - med_a[f]))
        if fn not in a:
            return f"; the biggest change in a phase: {fn}, called in {name} only ({med_b[fn]:.3f} ms per iteration)"
        if fn not in b:
            return (f"; the biggest change in a phase: {fn}, not called in {name} "
                    f"({med_a[fn]:.3f} ms per iteration in {base})")
        c = compare(name, b[fn].to_numpy(float), base, a[fn].to_numpy(float))
        return (f"; the biggest change in a phase: {fn}, {med_a[fn]:.3f} -> {med_b[fn]:.3f} ms per "
                f"iteration, {c.words('the time')}")

    def _repr_html_(self) -> str:
        import html
        cols = [c for c in ("status", "iterations", "iter_median_ms", "iter_p95_ms", "iters_per_s",
                            "rss_slope_kb_per_1k_iter", "rss_peak_kb", "heap_growth_per_iter_bytes",
                            "memfree_drop_kb", "dma_peak_bytes") if c in self.summary]
        return (f"<pre>{html.escape(self.describe())}</pre>"
                + self.summary[cols].to_html(float_format=lambda x: f"{x:,.2f}"))

    @staticmethod
    def _memory_verdicts(ok) -> List[str]:
        """Which variants' memory grows, is flat, or cannot be judged yet.  A
        variant whose memory grows is named with what grows (malloc heap,
        RSS, DMA total) unless all that was sampled grows.  The DMA total
        counts only where it was sampled (older traces have none)."""
        if not len(ok) or "rss_verdict" not in ok:
            return []
        labels = (("heap_verdict", "malloc heap"), ("rss_verdict", "RSS"), ("dma_verdict", "DMA total"))
        verdicts = {}
        for n, r in ok.iterrows():
            verdicts[n] = {label: r[column] for column, label in labels
                           if column in r and (column != "dma_verdict" or r.get("dma_samples", 0) > 0)}
        growing = []
        for n, v in verdicts.items():
            grows = [label for label, verdict in v.items() if verdict == "grows"]
            if grows:
                growing.append(n + ("" if len(grows) == len(v) else f" ({', '.join(grows)})"))
        unsure = [n for n, v in verdicts.items()
                  if "grows" not in v.values() and "cannot tell" in v.values()]
        out = []
        if growing:
            out.append("Memory grows in: " + ", ".join(growing)
                       + "; at a steady rate over the measured loop: a leak if it never levels off.")
        if unsure:
            out.append("Cannot tell yet whether memory grows in: " + ", ".join(unsure)
                       + " (run more iterations; see each line).")
        if not growing and not unsure:
            out.append("No variant's memory grows with the iterations (each within the floor its "
                       "line states).")
        return out

    def __repr__(self) -> str:
        st = ", ".join(f"{r.name}: {r.status}" for r in self.runs)
        return f"<rknnlab Result {self.meta.get('model', {}).get('name', '?')} — {self.source}; {st}>"

    # ------------------------------------------------------------------ traces
    def to_dict(self) -> Dict[str, Any]:
        from .trace import result_to_dict
        return result_to_dict(self)

    def save(self, path) -> None:
        """Write the result as a JSON trace (see rknnlab.experiment.trace)."""
        from .trace import save
        save(self, path)

    @classmethod
    def load(cls, path) -> "Result":
        from .trace import load
        return load(path)
