"""Experiments: variants run in fresh processes, instrumented and sampled.

``run(variants, model=..., iterations=..., backend=..., sample_hz=...)`` returns a
:class:`Result` with tidy DataFrames; ``load(path)`` reads a saved trace.
See :mod:`.variants` for how to write a variant.
"""
from __future__ import annotations

from .result import Result, VariantRun
from .runner import RunError, expand_variants, run
from .trace import TraceError, load, save
from .variants import BUILTIN, GROUPS, VariantContext, VariantUnavailable

__all__ = ["run", "Result", "VariantRun", "RunError", "load", "save", "TraceError",
           "VariantContext", "VariantUnavailable", "BUILTIN", "GROUPS", "expand_variants"]
