"""Steady state: the pipeline over many frames, with RSS, the malloc heap and the
runtime's DMA total read all along, and a growth verdict for each.

The loop runs in its own process (rknnlab.experiment: the notebook's kernel survives
a crash, and the memory read is the loop's alone), one worker on RKNN_NPU_CORE_0,
zero-copy, with a progress bar.  Two measurements, because "Reuse means no
allocation per call. Flat memory only shows there is no leak.":

- the growth verdict of each series (rknnlab.experiment.growth: a slope with its
  95% interval; "flat", "grows", or "cannot tell yet");
- the heap's rise inside each frame (mallinfo2 read after every stage, minus before
  the frame): what a frame allocates and keeps past a stage, even when it frees it
  again before the next;
- after the measured frames, PEAK_FRAMES more traced by tracemalloc: each stage's
  peak of Python's (and numpy's) memory above its start, temporaries freed inside
  the stage included (on the simulator the runtime calls' peaks are the simulator's
  own Python; a board's runtime allocates in C, which neither instrument sees).

``planted="letterbox_malloc"`` adds a fresh letterbox buffer every frame (as
Rockchip's model-zoo demos do): a real allocation per frame that a flat curve does
not show, and the rise inside each frame does.

The long run (>= 1,000 frames) is recorded in data/traces/ch06_steady_*.json; make a
new one with ``python -m rknnlab.pipeline.steady --frames 3000`` (see ``--help``).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Union

import numpy as np

from .loop import NPU_CORES, OWN_STAGES, STAGES, Worker, distinct_frames, values_mode

#: the series the verdicts judge, as (key, summary prefix, column in the samples, unit label)
SERIES = (("rss", "rss", "rss_kb", "RSS"), ("heap", "heap", "heap_in_use_bytes", "malloc heap in use"),
          ("dma", "dma", "dma_bytes", "runtime DMA total"))
#: points per series kept in a result (a recorded trace stays small)
KEEP_POINTS = 600
FORMAT = "rknnlab.pipeline.steady/1"
#: frames traced by tracemalloc after the measured ones (tracing slows Python's
#: allocations, and its bookkeeping lives in the malloc heap the series read)
PEAK_FRAMES = 20


# --------------------------------------------------------------------------- the variants (child process)
def _pipeline(lab: Any, planted: Optional[str]) -> None:
    """The zero-copy pipeline, one worker, over ``lab.total`` frames; the heap's rise
    inside each frame summarised on stdout (one JSON line) at the end."""
    from ..probe import Heap
    from ..rknn import abi
    p = lab.params
    frames = distinct_frames(int(p.get("distinct", 8)), int(p.get("width", 1280)), int(p.get("height", 720)))
    rt = lab.rt
    heap = Heap()
    ctx = rt.init(lab.model_path)
    worker = Worker(rt, ctx, "zero_copy", planted, core_mask=abi.RKNN_NPU_CORE_0, heap=heap)
    times = np.zeros((len(STAGES), 2))
    rises = np.full((lab.total, len(STAGES)), np.nan)    # once: no allocation per frame
    boxes = np.zeros(lab.total, np.int64)
    worker.frame(frames[0], times)          # real output values: a replay repeats them
    peaks = np.full((PEAK_FRAMES, len(STAGES)), np.nan)
    with values_mode(rt, bool(p.get("values", False))):
        for i in lab.loop():
            boxes[i] = len(worker.frame(frames[i % len(frames)], times, rises[i]))
        tracemalloc.start()             # after the loop: the series' stage is "teardown" now
        for i in range(PEAK_FRAMES):
            worker.frame(frames[i % len(frames)], times, heap_peak=peaks[i])
        tracemalloc.stop()
    worker.close()
    rt.destroy(ctx)
    measured = rises[lab.warmup:]
    per_frame = np.nanmax(measured, axis=1)
    step = max(1, len(per_frame) // KEEP_POINTS)
    print(json.dumps({"heap_rise": {
        "per_frame_median_bytes": float(np.median(per_frame)), "per_frame_max_bytes": float(per_frame.max()),
        "by_stage_median_bytes": {s: float(np.median(measured[:, k])) for k, s in enumerate(STAGES)},
        "frames": list(range(lab.warmup, lab.total, step)), "bytes": [float(v) for v in per_frame[::step]],
        "peak_own_median_bytes": float(np.median(np.nanmax(peaks[:, OWN_STAGES], axis=1))),
        "peak_by_stage_median_bytes": {s: float(np.median(peaks[:, k])) for k, s in enumerate(STAGES)},
        "peak_frames": PEAK_FRAMES},
        "boxes_mean": float(boxes[lab.warmup:].mean())}))


def clean(lab: Any) -> None:
    """The chapter's pipeline: every buffer made once (letterbox straight into the
    input mem bound once, output mem bound once, read in place)."""
    _pipeline(lab, None)


def letterbox_malloc(lab: Any) -> None:
    """The same pipeline with one planted allocation: a fresh letterbox buffer every
    frame, copied into the input mem (as the model-zoo demos malloc one per call)."""
    _pipeline(lab, "letterbox_malloc")


VARIANTS = {None: clean, "letterbox_malloc": letterbox_malloc}


# --------------------------------------------------------------------------- the result
class SteadyState:
    """Series and verdicts of one or more steady-state runs (``variants``: "clean",
    "letterbox_malloc").  ``series[v]``: iteration, rss_bytes, heap_bytes, dma_bytes
    (at most KEEP_POINTS readings of the measured frames, evenly thinned);
    ``verdicts[v][s]`` for s in rss, heap, dma: verdict, words, slope and half_width
    (bytes per frame); ``heap_rise[v]``: the heap's rise inside a frame
    (per_frame_median_bytes, per_frame_max_bytes, by_stage_median_bytes, frames,
    bytes) and the tracemalloc peaks of PEAK_FRAMES more frames
    (peak_own_median_bytes: the larger of the convert and post stages' peaks, the
    pipeline's own code; peak_by_stage_median_bytes; peak_frames);
    ``meta``: source, command, created, backend, host, frames."""

    def __init__(self, meta: Dict[str, Any], series: Dict[str, Dict[str, List[float]]],
                 verdicts: Dict[str, Dict[str, Dict[str, Any]]], heap_rise: Dict[str, Dict[str, Any]],
                 status: Dict[str, str]) -> None:
        self.meta, self.series, self.verdicts, self.heap_rise, self.status = meta, series, verdicts, heap_rise, status

    @property
    def source(self) -> str:
        return str(self.meta.get("source", "source not recorded"))

    @property
    def variants(self) -> List[str]:
        return list(self.series)

    def table(self):
        """One row per variant and series: variant, series, verdict, slope_bytes_per_frame,
        pm_bytes (95% half-width), words; plus a row "heap rise inside a frame".
        attrs["source"]."""
        import pandas as pd
        rows = []
        for v in self.variants:
            for key, _, _, label in SERIES:
                g = self.verdicts[v][key]
                rows.append({"variant": v, "series": label, "verdict": g["verdict"],
                             "slope_bytes_per_frame": g["slope"], "pm_bytes": g["half_width"],
                             "words": g["words"]})
        df = pd.DataFrame(rows)
        df.attrs["source"] = self.source
        return df

    def rises(self):
        """One row per variant: heap_per_frame_bytes (median of each frame's largest
        rise), heap_max_rise_bytes, the median rise after each stage
        (after_<stage>_bytes), peak_own_bytes (median over the traced frames of the
        larger of the convert and post stages' tracemalloc peaks: the pipeline's own
        code) and peak_<stage>_bytes."""
        import pandas as pd
        rows = []
        for v in self.variants:
            h = self.heap_rise.get(v) or {}
            row = {"variant": v, "heap_per_frame_bytes": h.get("per_frame_median_bytes", math.nan),
                   "heap_max_rise_bytes": h.get("per_frame_max_bytes", math.nan)}
            for s in STAGES:
                row[f"after_{s}_bytes"] = (h.get("by_stage_median_bytes") or {}).get(s, math.nan)
            row["peak_own_bytes"] = h.get("peak_own_median_bytes", math.nan)
            for s in STAGES:
                row[f"peak_{s}_bytes"] = (h.get("peak_by_stage_median_bytes") or {}).get(s, math.nan)
            rows.append(row)
        df = pd.DataFrame(rows)
        df.attrs["source"] = self.source
        return df

    def summary(self) -> str:
        lines = []
        for v in self.variants:
            if self.status.get(v) != "ok":
                lines.append(f"{v}: {self.status.get(v)}")
                continue
            h = self.heap_rise.get(v) or {}
            parts = [f"{label} {self.verdicts[v][key]['words']}" for key, _, _, label in SERIES]
            lines.append(f"{v}: " + "; ".join(parts)
                         + f"; heap rise inside a frame {h.get('per_frame_median_bytes', math.nan):,.0f} B (median)"
                         + f"; tracemalloc peak of its own stages {h.get('peak_own_median_bytes', math.nan):,.0f} B")
        return "\n".join(lines + [f"{self.meta.get('frames', '?')} frames per variant; source: {self.source}"])

    def __repr__(self) -> str:
        return f"<SteadyState\n{self.summary()}>"

    def to_dict(self) -> Dict[str, Any]:
        return {"format": FORMAT, "meta": self.meta, "series": self.series, "verdicts": self.verdicts,
                "heap_rise": self.heap_rise, "status": self.status}

    @classmethod
    def from_dict(cls, data: Any, where: str = "steady-state trace") -> "SteadyState":
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError(f"{where}: not a steady-state trace (format {FORMAT!r} expected)")
        for key in ("meta", "series", "verdicts", "heap_rise", "status"):
            if not isinstance(data.get(key), dict):
                raise ValueError(f"{where}: the field {key!r} is missing or not an object")
        for v, s in data["series"].items():
            lengths = {len(s.get(c) or []) for c in ("iteration", "rss_bytes", "heap_bytes", "dma_bytes")}
            if len(lengths) != 1:
                raise ValueError(f"{where}: the series of {v!r} have different lengths")
        return cls(data["meta"], data["series"], data["verdicts"], data["heap_rise"], data["status"])

    def save(self, path: Union[str, Path]) -> Path:
        path = Path(path)
        path.write_text(json.dumps(self.to_dict(), indent=1, allow_nan=False, default=_json_default) + "\n")
        return path

    @classmethod
    def load(cls, path: Union[str, Path]) -> "SteadyState":
        """Read a trace written by :meth:`save` (JSON only; nothing is unpickled)."""
        path = Path(path)
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise ValueError(f"{path}: cannot read a steady-state trace ({exc})") from None
        return cls.from_dict(data, str(path))


def _json_default(x: Any) -> Any:
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.floating,)):
        return float(x)
    raise TypeError(f"{type(x).__name__} is not JSON")


def _finite(x: float) -> Optional[float]:
    return float(x) if x is not None and math.isfinite(float(x)) else None


def _from_result(result: Any, names: Dict[str, str], frames: int, command: str) -> SteadyState:
    summary = result.summary
    samples = result.samples
    series, verdicts, rises, status = {}, {}, {}, {}
    for variant, label in names.items():
        run = result[variant]
        status[label] = run.status if run.ok else f"{run.status}: {run.error}"
        s = samples[(samples["variant"] == variant) & (samples["stage"] == "measure")] if len(samples) else samples
        s = s.dropna(subset=["iteration"]) if len(s) else s
        step = max(1, len(s) // KEEP_POINTS)
        thin = s.iloc[::step] if len(s) else s

        def col(name: str, scale: float = 1.0) -> List[Optional[float]]:
            if name not in thin:
                return [None] * len(thin)
            return [_finite(v * scale) if v == v else None for v in thin[name].to_numpy(float)]

        series[label] = {"iteration": [int(i) for i in thin["iteration"]] if len(thin) else [],
                         "rss_bytes": col("rss_kb", 1024.0), "heap_bytes": col("heap_in_use_bytes"),
                         "dma_bytes": col("dma_bytes")}
        row = summary.loc[variant]
        verdicts[label] = {key: {"verdict": str(row.get(f"{prefix}_verdict")), "words": str(row.get(f"{prefix}_growth")),
                                 "slope": _finite(row.get(f"{prefix}_slope_bytes_per_iter")),
                                 "half_width": _finite(row.get(f"{prefix}_slope_pm_bytes"))}
                           for key, prefix, _, _ in SERIES}
        rises[label] = {}
        for line in reversed((run.stdout or "").splitlines()):
            if line.startswith("{") and "heap_rise" in line:
                data = json.loads(line)
                rises[label] = dict(data["heap_rise"], boxes_mean=data.get("boxes_mean"))
                break
    host = result.meta.get("host", {})
    params = result.meta.get("parameters", {}).get("params", {})
    values = ("output values replayed from the warm-up frame's real inference (rknnlab.sim.values_replayed)"
              if result.meta.get("backend") == "sim" and not params.get("values") else "")
    soc = str(result.meta.get("model", {}).get("soc") or "rk3588")
    on = "on CORE_0" if NPU_CORES.get(soc.lower(), 1) > 1 else "with no core mask (one NPU core)"
    meta = {"source": (f"{result.source}: {result.meta.get('model', {}).get('name')} pipeline, zero_copy, "
                       f"1 worker {on}, {frames:,} frames per variant" + (f"; {values}" if values else "")),
            "backend": result.meta.get("backend"), "model": result.meta.get("model", {}).get("name"),
            "frames": frames, "created": result.meta.get("created"), "command": command,
            "host": {"cpu_count": host.get("cpu_count"), "python": host.get("python"),
                     "machine": host.get("machine")},
            "parameters": params,
            "rknnlab_version": result.meta.get("rknnlab_version")}
    return SteadyState(meta, series, verdicts, rises, status)


def steady_state(n_frames: int = 300, planted: Union[None, str, Sequence[Optional[str]]] = None,
                 model: str = "ppocr_det", values: bool = False, width: int = 1280, height: int = 720,
                 warmup: int = 10, backend: str = "auto", soc: Optional[str] = None,
                 progress: Optional[bool] = None, timeout: Optional[float] = 600.0,
                 command: Optional[str] = None) -> SteadyState:
    """Run the zero-copy pipeline for ``n_frames`` measured frames (after ``warmup``)
    in a fresh process per variant and judge RSS, the heap and the DMA total.

    ``planted``: None (the clean pipeline), "letterbox_malloc", or a list of them
    (each its own process, in that order).  ``values=False`` (default): output values
    replayed on the simulator, so a frame costs the modeled NPU time and the CPU
    stages.  ``width`` x ``height``: the camera's frames.  ~300 frames take a few
    seconds per variant on the simulator; verdicts need enough frames to rule out a
    slow leak ("cannot tell yet" says how many more)."""
    from .. import experiment
    # sample_calls: a full reading (the heap included) after every runtime call, three
    # per frame; the sampler's own schedule reads the heap at only 10 Hz
    kinds = [planted] if planted is None or isinstance(planted, str) else list(planted)
    unknown = [k for k in kinds if k not in VARIANTS]
    if unknown or not kinds:
        raise ValueError(f"planted={planted!r}: None, 'letterbox_malloc', or a list of them")
    funcs = [VARIANTS[k] for k in kinds]
    result = experiment.run(funcs, model=model, iterations=n_frames, warmup=warmup, backend=backend, soc=soc,
                            params={"values": bool(values), "width": width, "height": height},
                            timeout=timeout, progress=progress, sample_calls=True)
    names = {f.__name__: f.__name__ for f in funcs}
    cmd = command or (f"rknnlab.pipeline.steady_state(n_frames={n_frames}, planted={planted!r}, "
                      f"values={values}, width={width}, height={height})")
    return _from_result(result, names, n_frames, cmd)


# --------------------------------------------------------------------------- the long run, from a shell
def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m rknnlab.pipeline.steady",
        description="Record a long steady-state run of the chapter 6 pipeline (clean and planted) as JSON.")
    parser.add_argument("--frames", type=int, default=3000, help="measured frames per variant (default 3000)")
    parser.add_argument("--out", default=None, help="output file (default data/traces/ch06_steady_<frames>.json)")
    parser.add_argument("--values", action="store_true", help="compute output values (default: replayed)")
    args = parser.parse_args(argv)
    from ..paths import repo_root
    out = Path(args.out) if args.out else repo_root() / "data" / "traces" / f"ch06_steady_{args.frames}.json"
    command = "python -m rknnlab.pipeline.steady " + " ".join(argv if argv is not None else sys.argv[1:])
    # the variants must be importable by name in the child: this module's, not __main__'s
    import importlib
    steady = importlib.import_module("rknnlab.pipeline.steady")
    result = steady.steady_state(n_frames=args.frames, planted=(None, "letterbox_malloc"), values=args.values,
                          timeout=None, command=command.strip())
    result.meta["recorded_on"] = f"{platform.node() or 'this host'} ({os.cpu_count()} CPUs), {time.strftime('%Y-%m-%d')}"
    out.parent.mkdir(parents=True, exist_ok=True)
    result.save(out)
    print(result.summary())
    print(f"written: {out}")
    return 0 if all(s == "ok" for s in result.status.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
