"""Lab 7, exercises 5 to 7 (choosing a strategy from measurements): the checks
:func:`check_budget`, :func:`check_sram` and :func:`check_core_masks`."""
from __future__ import annotations

from typing import Any

from ._core import CheckResult, _not_done
from ._lab07_common import EX_BUDGET, EX_CORES, EX_SRAM, _LAB

__all__ = ["check_budget", "check_sram", "check_core_masks"]


def check_budget(setup: Any) -> CheckResult:
    """Exercise 5 (being written)."""
    def body() -> CheckResult:
        raise _not_done("this check is being written.", "try again after updating the course.")
    return _LAB.run(EX_BUDGET, body)


def check_sram(predictions: Any) -> CheckResult:
    """Exercise 6 (being written)."""
    def body() -> CheckResult:
        raise _not_done("this check is being written.", "try again after updating the course.")
    return _LAB.run(EX_SRAM, body)


def check_core_masks(choose_mask: Any) -> CheckResult:
    """Exercise 7 (being written)."""
    def body() -> CheckResult:
        raise _not_done("this check is being written.", "try again after updating the course.")
    return _LAB.run(EX_CORES, body)
