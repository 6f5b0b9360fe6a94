"""Lab 7 (misconceptions and review): the lab's exercises and the one :class:`Lab` their checks
record into.  The checks live in three modules (``_lab07_review``, ``_lab07_strategy``,
``_lab07_c``); :mod:`rknnlab.checks.lab07` gathers them."""
from __future__ import annotations

from ._core import Lab

EX_SIZES = "Exercise 1 — predict the sizes"
EX_CALLS = "Exercise 2 — make four failing calls succeed"
EX_TRACES = "Exercise 3 — diagnose three memory traces"
EX_ROWS = "Exercise 4 — write rows at the right stride"
EX_BUDGET = "Exercise 5 — fit three models in a memory budget"
EX_SRAM = "Exercise 6 — predict where SRAM goes"
EX_CORES = "Exercise 7 — choose core masks from measurements"
EX_C = "Exercise 8 ★ — fix a C program"

EXERCISES = [EX_SIZES, EX_CALLS, EX_TRACES, EX_ROWS, EX_BUDGET, EX_SRAM, EX_CORES, EX_C]

_LAB = Lab("Lab 7", EXERCISES)
