"""rknnlab: the helper library of a Jupyter course on memory in RKNN inference.

Modules (the repository's layout: README.md, section "Layout"): ``rknnlab.rknn`` (the
RKNN C API as Python, native or simulated), ``rknnlab.sim``, ``rknnlab.models``,
``rknnlab.board``, ``rknnlab.probe``, ``rknnlab.experiment``, ``rknnlab.lifecycle``
(chapter 2), ``rknnlab.lite`` (rknn-toolkit-lite2's RKNNLite: the wheel on a board, the
simulator elsewhere), ``rknnlab.profile`` (chapter 3: where a frame's time goes, per-layer
profiles, bytes per frame, CPU-side costs, heap fragmentation, core masks),
``rknnlab.allocation`` (chapter 5: preallocation, memory outside the runtime, one internal
buffer for several models, pipelines, dynamic shapes, NPU SRAM, the IOMMU domain),
``rknnlab.plot``/``rknnlab.widgets``, ``rknnlab.checks``, ``rknnlab.cc`` (C programs against
the board's librknnrt.so or the simulator's, which ``rknnlab.sim.capi`` serves) and its
notebook magic ``%%rknn_c`` (``rknnlab.cmagic``, loaded by ``%load_ext rknnlab``), and the command line
``python -m rknnlab`` (README.md, sections "``python -m rknnlab doctor``" and
"``python -m rknnlab run`` and ``show``").

Keep this module light: ``python -m rknnlab doctor`` must work with only numpy and
psutil installed, so heavy imports belong in the submodules.
"""
__version__ = "0.1.0"

#: the package's public face (``from rknnlab import *``; submodules are imported by name)
__all__ = ["open_runtime", "run", "ENV_SIM_SOC", "__version__"]

#: environment variable naming the SoC the simulator plays when none is given
ENV_SIM_SOC = "RKNNLAB_SIM_SOC"


def load_ipython_extension(ipython: "object") -> None:
    """``%load_ext rknnlab``: the ``%%rknn_c`` magic (rknnlab.cmagic)."""
    from .cmagic import load
    load(ipython)


def open_runtime(backend: str = "auto", soc: "str | None" = None) -> "rknnlab.rknn.runtime.Runtime":
    """The RKNN runtime to drive: ``native`` (librknnrt.so on a board) or ``sim``.

    ``backend="auto"`` picks native when librknnrt.so loads and an RKNPU device
    is present, else the simulator; the environment variable RKNNLAB_BACKEND
    overrides "auto" (see rknnlab.board.choose_backend).  ``soc`` is the SoC
    the simulator plays (default: $RKNNLAB_SIM_SOC, else rk3588); a board
    always runs as itself.
    """
    import os

    from .board import choose_backend

    chosen, _reason = choose_backend(backend)
    if chosen == "native":
        from .rknn.native import NativeRuntime
        return NativeRuntime()
    from .sim import SimRuntime
    return SimRuntime(soc or os.environ.get(ENV_SIM_SOC) or "rk3588")


def run(variants: "str | Callable | Sequence[str | Callable]", model: str = "mobilenet_v2",
        iterations: int = 200, backend: str = "auto", sample_hz: float = 200.0,
        warmup: int = 10, soc: "str | None" = None, seed: int = 0, n_frames: int = 4,
        params: "dict[str, Any] | None" = None, timeout: "float | None" = 300.0,
        on_progress: "Callable[[dict], None] | None" = None, trim_after_warmup: bool = True,
        progress: "bool | None" = None, sample_calls: bool = False) -> "rknnlab.experiment.Result":
    """Run each variant in its own fresh process, one after another, on the same
    seeded inputs, and return a :class:`rknnlab.experiment.Result`
    (``.describe()``, ``.summary``, ``.calls``, ``.iterations``, ``.samples``,
    ``.phases``, ``.save(path)``).

    ``variants``: built-in names (``rknnlab.experiment.BUILTIN``;
    "want_float_vs_int8" is the pair), functions taking ``lab`` (see
    rknnlab.experiment.variants), or a list of both.

    ``model``: a course model's name or a .rknn path.  ``iterations``
    measured iterations follow ``warmup`` warm-up ones (marked
    ``stage == "warmup"``).  ``backend``: "auto", "sim", "native" (or
    "module:factory" for a Runtime of your own).  ``soc`` defaults to the
    board's (native) or "rk3588".  ``seed`` and ``n_frames``: the seeded
    uint8 frames, cycled (the simulator caches the outputs of its last 4
    inputs; more frames make every simulated run pay for onnxruntime).
    ``params``: plain values a variant reads as ``lab.params``.

    ``sample_hz``: RSS samples per second (0 turns sampling off; at most
    1000); system memory, heap and NPU come at 10 Hz, PSS every 5 s
    (rknnlab.probe.Probe).  ``trim_after_warmup``: call glibc's
    malloc_trim(0) just before the first measured iteration, so that RSS
    growth in the measured loop is new memory rather than reuse of what
    warm-up freed.  ``sample_calls``: also take a full sample (RSS, heap,
    MemFree, DMA total) right after every runtime call and every
    ``lab.timed`` block, so each step of a short lifecycle has its own
    reading (rknnlab.lifecycle.phase_table); each costs up to a few ms, so
    keep it for runs of a few iterations.

    ``timeout`` (s) per variant.  ``progress``: a bar of the iterations done
    across the variants, for runs longer than a second; None (the default)
    shows one where a person is watching (a widget in JupyterLab, removed
    when the run ends; text on a terminal's stderr) and none in an
    unattended notebook execution, when stderr is not a terminal, or when
    ``on_progress`` is given; True or False force it (see
    rknnlab.experiment.progress; the environment variable
    RKNNLAB_PROGRESS=0 turns the default off).  ``on_progress(msg)`` is
    called from a reader thread with each message a variant's process
    streams (variant, iteration, the new calls, iterations and samples as
    columns).

    A variant that raises, crashes (even with a segfault) or times out gives
    a row with its status and error; the others still run.
    """
    from .experiment.runner import run as _run
    return _run(variants, model=model, iterations=iterations, backend=backend,
                sample_hz=sample_hz, warmup=warmup, soc=soc, seed=seed, n_frames=n_frames,
                params=params, timeout=timeout, on_progress=on_progress,
                trim_after_warmup=trim_after_warmup, progress=progress, sample_calls=sample_calls)
