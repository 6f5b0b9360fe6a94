"""rknnlab: the helper library of a Jupyter course on memory in RKNN inference.

Layers (see the design notes): ``rknnlab.rknn`` (the RKNN C API as Python, native
or simulated), ``rknnlab.sim``, ``rknnlab.models``, ``rknnlab.board``, ``rknnlab.probe``,
``rknnlab.experiment``, ``rknnlab.plot``/``rknnlab.widgets``, ``rknnlab.checks``, and
the command line ``python -m rknnlab``.

Keep this module light: ``python -m rknnlab doctor`` must work with only numpy and
psutil installed, so heavy imports belong in the submodules.
"""
from __future__ import annotations

import os as _os
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    from .rknn.runtime import Runtime

__version__ = "0.1.0"

#: environment variable naming the SoC the simulator plays when none is given
ENV_SIM_SOC = "RKNNLAB_SIM_SOC"


def open_runtime(backend: str = "auto", soc: Optional[str] = None) -> "Runtime":
    """The RKNN runtime to drive: ``native`` (librknnrt.so on a board) or ``sim``.

    ``backend="auto"`` picks native when librknnrt.so loads and an RKNPU device
    is present, else the simulator; the environment variable RKNNLAB_BACKEND
    overrides "auto" (see rknnlab.board.choose_backend).  ``soc`` is the SoC
    the simulator plays (default: $RKNNLAB_SIM_SOC, else rk3588); a board
    always runs as itself.
    """
    from .board import choose_backend

    chosen, _reason = choose_backend(backend)
    if chosen == "native":
        from .rknn.native import NativeRuntime
        return NativeRuntime()
    from .sim import SimRuntime
    return SimRuntime(soc or _os.environ.get(ENV_SIM_SOC) or "rk3588")


def run(*args, **kwargs):
    """Run variants, each in a fresh process, and return the result (see
    :func:`rknnlab.experiment.run`).  Imported on first use to keep
    ``import rknnlab`` light."""
    from .experiment import run as _run
    return _run(*args, **kwargs)
