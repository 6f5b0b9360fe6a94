"""The process one variant runs in: ``python -m rknnlab.experiment._child``.

The parent (rknnlab.experiment.runner) writes a JSON spec to stdin: the
variant (a built-in's name, an importable module + qualname, or source code
with the plain values, modules and functions it refers to), the backend, the
model, the seeded inputs' recipe and the sampling rate.  This process opens
the runtime, wraps it in the instrumented proxy, starts the memory sampler,
calls the variant and writes JSON lines to the file descriptor the spec
names: ``progress`` messages (the calls, iterations and memory samples
recorded since the last message, a few per second, so a crash still leaves
a memory curve; sent rows are dropped here, so the recording does not grow
inside the process it measures) and finally one ``result``.  The iteration
in progress also goes into a shared 16-byte file mapping (a plain memory
write per iteration): the parent reads it for its progress bar and, if
this process dies, to say where.

JSON only, never pickle: nothing in the spec is executed except the
variant's own source, which the notebook's user wrote.
"""
from __future__ import annotations

import faulthandler
import importlib
import json
import linecache
import os
import sys
import threading
import time
import traceback
from typing import Any, Callable, Dict, Optional

import numpy as np


class _Channel:
    def __init__(self, fd: int) -> None:
        self._f = os.fdopen(fd, "w", buffering=1 << 16)
        self._lock = threading.Lock()

    def send(self, message: Dict[str, Any]) -> None:
        line = json.dumps(message, separators=(",", ":"), allow_nan=False, default=_jsonable)
        with self._lock:
            self._f.write(line + "\n")
            self._f.flush()


def _jsonable(x: Any) -> Any:
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.floating):
        return float(x)
    raise TypeError(f"not JSON serializable: {type(x).__name__}")


def _samples(d: Dict[str, list]) -> Dict[str, list]:
    """Probe columns -> JSON: stage codes -> names, whole numbers -> int."""
    from .instrument import STAGES
    out: Dict[str, list] = {}
    for k, v in d.items():
        if k == "stage":
            out[k] = [None if x is None else STAGES[int(x)] for x in v]
        elif k.endswith(("_pct",)):
            out[k] = v
        else:
            out[k] = [None if x is None else int(x) for x in v]
    return out


def load_variant(spec: Dict[str, Any]) -> Callable[..., Any]:
    kind = spec["kind"]
    if kind == "builtin":
        from . import variants
        return variants.BUILTIN[spec["name"]]
    if kind == "import":
        obj: Any = importlib.import_module(spec["module"])
        for part in spec["qualname"].split("."):
            obj = getattr(obj, part)
        return obj
    if kind != "source":
        raise ValueError(f"unknown variant kind {kind!r}")
    import rknnlab
    from . import variants
    from ..rknn import abi, buffers, errors
    ns: Dict[str, Any] = {"__name__": "__variant__", "__builtins__": __builtins__,
                          "np": np, "rknnlab": rknnlab, "abi": abi, "buffers": buffers,
                          "errors": errors}
    ns.update({k: getattr(variants, k) for k in ("query_io", "frame_input", "VariantUnavailable")})
    for name, (module, attr) in spec.get("imports", {}).items():
        try:
            m = importlib.import_module(module)
            ns[name] = getattr(m, attr) if attr else m
        except Exception:  # leave it undefined: a NameError names it if the variant uses it
            pass
    ns.update(spec.get("globals", {}))
    for i, (name, source) in enumerate(list(spec.get("functions", {}).items()) + [(spec["name"], spec["source"])]):
        filename = f"<variant {spec['name']}: {name}>"
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        exec(compile(source, filename, "exec"), ns)
    for alias, defined_as in spec.get("aliases", {}).items():
        ns[alias] = ns[defined_as]
    return ns[spec["name"]]


def open_backend(backend: str, soc: str = "") -> Any:
    if ":" in backend:  # "package.module:factory", for tests and custom backends
        module, attr = backend.split(":", 1)
        return getattr(importlib.import_module(module), attr)()
    import rknnlab
    opener = getattr(rknnlab, "open_runtime", None)
    if opener is None:
        raise RuntimeError("this rknnlab has no open_runtime(): the runtime backends are not installed")
    try:
        return opener(backend=backend, soc=soc or None)
    except TypeError:  # an open_runtime without soc
        return opener(backend=backend)


def _user_traceback(exc: BaseException) -> str:
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(exc), exc, tb))


def _rknnlite_kind() -> Optional[str]:
    """Which RKNNLite the variant used: "simulated" (rknnlab.lite's model of the wheel),
    "wheel" (Rockchip's, on a board), or None (it made none)."""
    lite = sys.modules.get("rknnlab.lite")
    if lite is None:
        return None
    return next((kind for kind in ("simulated", "wheel") if lite.made.get(kind)), None)


def main() -> int:
    spec = json.loads(sys.stdin.read())
    chan = _Channel(spec["fd"])
    faulthandler.enable()  # a segfault prints the Python stack to stderr, which the parent keeps
    t0 = time.perf_counter_ns()

    from ..probe import Probe
    from .instrument import InstrumentedRuntime, Recorder
    from .variants import VariantContext, VariantUnavailable, fill_tcache

    rec = Recorder(t0)
    status, error, tb_text = "ok", None, None
    probe: Optional[Probe] = None
    rt = None
    stop_stream = threading.Event()
    last_iteration = [None]
    sending = rec.quiet  # a heap reading around one call waits for a send to finish

    tcache_filled = threading.Event()

    def stream() -> None:
        if spec.get("trim_after_warmup", True):
            with rec.quiet:
                fill_tcache()  # its frees of JSON buffers would fill it during the loop
        tcache_filled.set()
        while not stop_stream.wait(spec.get("stream_every_s", 0.25)):
            send_progress()

    def send_progress() -> None:
        # everything recorded since the last message goes out and is forgotten
        # here: the recording does not grow inside the process it measures
        with sending:
            msg: Dict[str, Any] = {"event": "progress", "iteration": last_iteration[0],
                                   "calls": rec.take_calls(), "iterations": rec.take_iterations()}
            if probe is not None:
                msg["samples"] = _samples(probe.take_new())
            chan.send(msg)

    rec.on_full = send_progress  # a loop faster than the stream: the variant's thread sends

    # the iteration in progress, in a shared file mapping the parent reads if
    # this process dies: a plain memory write per iteration, no system call
    marker = None
    if spec.get("progress_file"):
        import mmap
        import struct
        with open(spec["progress_file"], "r+b") as f:
            marker = mmap.mmap(f.fileno(), 16)
        pack = struct.Struct("qq").pack_into

    def on_iteration(i: int, done: bool) -> None:
        if done:
            last_iteration[0] = i
        if marker is not None:
            pack(marker, 0, i + 1, int(done))

    streamer = threading.Thread(target=stream, name="rknnlab-stream", daemon=True)
    try:
        func = load_variant(spec["variant"])
        rng = np.random.default_rng(spec["seed"])
        shape = tuple(spec["input_shape"])
        inputs = [rng.integers(0, 256, size=shape, dtype=np.uint8) for _ in range(spec["n_frames"])]
        rt = open_backend(spec["backend"], spec.get("soc", ""))
        lab = VariantContext(InstrumentedRuntime(rt, rec), rec, spec["model_path"], inputs,
                             spec["iterations"], spec["warmup"], spec.get("model", ""),
                             spec.get("soc", ""), spec.get("params"), progress=on_iteration,
                             trim_after_warmup=spec.get("trim_after_warmup", True))
        from ..lite import set_default_runtime
        set_default_runtime(lab.rt)  # an RKNNLite the variant makes runs (timed) on this runtime
        if spec["sample_hz"]:
            # the sampler copies iteration, stage and DMA total from an array the
            # recorder writes on each change (no Python call per sample)
            probe = Probe(spec["sample_hz"], t0_ns=t0, extra_columns=("iteration", "stage", "dma_bytes"))
            rec.share_state(probe.extra_values)
            rec.poll = probe.poll  # samples between runtime calls; the thread fills the gaps
            probe.start()
        streamer.start()
        if probe is not None and spec.get("sample_calls"):
            # a full sample after every call and timed block: a step of a short
            # lifecycle then has its own reading.  The baseline row is taken once
            # the streaming thread's tcache is full, so its ~240 KiB do not land
            # in the first call's heap change
            tcache_filled.wait(5.0)
            rec.poll = probe.sample
            probe.sample()
        func(lab)
    except VariantUnavailable as exc:
        status, error = "skipped", str(exc)
    except BaseException as exc:  # the variant's own error: report it, keep the data so far
        status, error, tb_text = "error", f"{type(exc).__name__}: {exc}", _user_traceback(exc)
        if isinstance(exc, NameError) and spec["variant"].get("kind") == "source":
            error += (" (the variant runs in a fresh process, which gets its source, the modules, "
                      "plain values and functions it uses, but not other objects of the notebook: "
                      "import or create them inside the variant)")
    finally:
        wall = time.perf_counter_ns() - t0
        stop_stream.set()
        if probe is not None:
            probe.stop()
        if streamer.is_alive():
            streamer.join()
        send_progress()
        result: Dict[str, Any] = {
            "event": "result", "status": status, "error": error, "traceback": tb_text,
            "wall_ns": wall, "sdk": rec.sdk, "rknnlite": _rknnlite_kind(),
            "backend": getattr(rt, "backend", None) or spec["backend"],
            "probe": None if probe is None else {
                "hz": probe.hz, "ticks": probe.ticks, "late_ticks": probe.late_ticks,
                "cpu_ns": probe.cpu_ns, "notes": probe.notes, "mid_every": probe.mid_every,
                "slow_every": probe.slow_every,
                "backend": probe.backend, "poll_rows": probe.poll_rows, "poll_ns": probe.poll_ns,
                "wakes": probe.wakes},
        }
        try:
            chan.send(result)
        except (TypeError, ValueError) as exc:
            chan.send({"event": "result", "status": "error", "wall_ns": wall,
                       "error": f"could not encode the result as JSON: {exc}"})
        if probe is not None:
            probe.close()
        if rt is not None:
            try:
                rt.close()
            except Exception:
                pass
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # do not wait for threads a variant left running
