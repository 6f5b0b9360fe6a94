"""Lab 7 (misconceptions and review): one check per exercise, each reviewing a chapter.

================================  ==============================================================
:func:`check_sizes`               1. predict the sizes (Chapters 1, 4, 7)
:func:`check_failing_calls`       2. make four failing calls succeed (Chapter 7's error codes)
:func:`check_traces`              3. diagnose three memory traces (Chapters 2 and 4)
:func:`check_rows`                4. write rows at the right stride (Chapters 6 and 7)
:func:`check_budget`              5. fit three models in a memory budget (Chapter 5)
:func:`check_sram`                6. predict where SRAM goes (Chapters 5 and 7)
:func:`check_core_masks`          7. choose core masks from measurements (Chapters 3 and 6)
:func:`check_c_program`           8. ★ fix a C program (Chapters 2 and 4)
================================  ==============================================================

:func:`summary` lists the lab's checks and whether each passed.  The notebook imports
``from rknnlab.checks import lab07 as checks``.  Each check measures what it judges itself;
the truth lives in private code, and the messages give measured numbers and a hint, never
the answer.
"""
from __future__ import annotations

from ._core import CheckResult
from ._lab07_common import (EX_BUDGET, EX_C, EX_CALLS, EX_CORES, EX_ROWS, EX_SIZES, EX_SRAM,
                            EX_TRACES, EXERCISES, _LAB)
from ._lab07_c import *  # noqa: F401,F403  (each module's __all__ holds its public names)
from ._lab07_c import __all__ as _c_names
from ._lab07_c import check_c_program
from ._lab07_review import *  # noqa: F401,F403
from ._lab07_review import __all__ as _review_names
from ._lab07_review import check_failing_calls, check_rows, check_sizes, check_traces
from ._lab07_strategy import *  # noqa: F401,F403
from ._lab07_strategy import __all__ as _strategy_names
from ._lab07_strategy import check_budget, check_core_masks, check_sram

summary = _LAB.summary
results = _LAB.results
_LAB.seal(globals(), {
    "check_sizes": EX_SIZES, "check_failing_calls": EX_CALLS, "check_traces": EX_TRACES,
    "check_rows": EX_ROWS, "check_budget": EX_BUDGET, "check_sram": EX_SRAM,
    "check_core_masks": EX_CORES, "check_c_program": EX_C,
})

__all__ = sorted({"CheckResult", "summary", "results", "EXERCISES",
                  *_review_names, *_strategy_names, *_c_names})
