"""rknnlab: the helper library of a Jupyter course on memory in RKNN inference.

Layers (see the design notes): ``rknnlab.rknn`` (the RKNN C API as Python, native
or simulated), ``rknnlab.sim``, ``rknnlab.models``, ``rknnlab.board``, ``rknnlab.probe``,
``rknnlab.experiment``, ``rknnlab.plot``/``rknnlab.widgets``, ``rknnlab.checks``, and
the command line ``python -m rknnlab``.

Keep this module light: ``python -m rknnlab doctor`` must work with only numpy and
psutil installed, so heavy imports belong in the submodules.
"""
from __future__ import annotations

__version__ = "0.1.0"
