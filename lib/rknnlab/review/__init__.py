"""Chapter 7 (misconceptions and review): the claims that circulate about RKNN memory,
each re-measured on this machine's runtime, and the runtime's error codes.

==============================  =====================================================
alignment                       :func:`alignment_table` (documented input alignment per
                                SoC), :func:`zero_copy_rows` (rows at w_stride, at the
                                width, at 64 bytes), :func:`unaligned_inputs_set`,
                                :func:`undersized_bind`
error codes                     :func:`error_codes` (-1 ... -13: trigger, message,
                                what to check), :func:`reproduce_error`
the claims, re-measured         :func:`pointer_reuse`, :func:`skip_release`,
                                :func:`who_allocates`, :func:`npu_memory_in_ram`,
                                :func:`core_masks`, :func:`want_float_cost`,
                                :func:`max_once`, :func:`sram_default`,
                                :func:`claims_table`
==============================  =====================================================
"""
from __future__ import annotations

import importlib
from typing import Any

# name -> submodule: imported on first use, so `import rknnlab.review` stays cheap
_NAMES = {
    "alignment_table": "alignment", "zero_copy_rows": "alignment", "RowsResult": "alignment",
    "unaligned_inputs_set": "alignment", "undersized_bind": "alignment",
    "InputsSetResult": "alignment", "UndersizedBind": "alignment", "ErrorRow": "errors",
    "error_codes": "errors", "ErrorTable": "errors", "reproduce_error": "errors",
    "pointer_reuse": "claims", "skip_release": "claims", "who_allocates": "claims",
    "npu_memory_in_ram": "claims", "core_masks": "claims", "want_float_cost": "claims",
    "max_once": "claims", "sram_default": "claims", "claims_table": "claims",
}

__all__ = sorted(_NAMES)


def __getattr__(name: str) -> Any:
    module = _NAMES.get(name)
    if module is None:
        raise AttributeError(f"module 'rknnlab.review' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list:
    return sorted(set(globals()) | set(_NAMES))
