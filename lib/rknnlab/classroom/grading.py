"""What a graded cell calls when ``nbgrader autograde`` runs a submission.

Autograde runs the student's notebook from the top in a fresh kernel (no output of the
student's own session counts). Before the first cell of the notebook, the autograde step
(:mod:`.nbgrader_autograde`) runs :func:`grader`, which takes the lab's check functions and
the lab's summary as they are in the fresh kernel, before any student code has run. Each
graded cell then calls that grader, under a name made for this run, instead of
``checks.check_x(...)``. So a cell that reassigns ``checks.check_x``, or writes into the
lab's results, changes nothing the grader uses; a check that finds rknnlab's own code
replaced judges nothing (``rknnlab.checks._core``), and the grader does not give points
while the lab's summary says so.

What no grader inside the student's kernel can stop: code written to find and patch the
grader's own objects. An instructor reads the code of any surprising submission (the
formgrader shows it).
"""
from __future__ import annotations

import importlib
from typing import Any, Callable

from ..checks._core import CheckNotPassed, CheckResult, _code_replaced_result
from ..i18n import pick as L


def grader(lab_module: str) -> Callable[..., None]:
    """A function ``grade(check_name, *args)`` that runs the check ``check_name`` of
    ``lab_module`` (e.g. ``"rknnlab.checks.lab04"``) as it was when :func:`grader` was
    called, shows its result, and raises :class:`CheckNotPassed` unless it passed."""
    module = importlib.import_module(lab_module)
    lab = module._LAB
    checks = {name: getattr(module, name) for name in module.POINTS}
    summary = type(lab).summary
    result_type, not_passed = CheckResult, CheckNotPassed
    replaced_result = _code_replaced_result
    try:
        from IPython.display import display
    except ImportError:          # outside Jupyter (a test): the result is printed
        display = print

    def grade(check_name: str, *args: Any) -> None:
        check = checks.get(check_name)
        if check is None:
            raise KeyError(f"{lab_module} has no graded check {check_name!r}")  # en-only: an instructor's error
        result = check(*args)
        if type(result) is not result_type:
            result = replaced_result(check_name, [f"{lab_module}.{check_name}"])
        state = summary(lab)
        changed = list(state.code_replaced) + [n for n in state.replaced if n == "_LAB.run"]
        if changed and result.status == "passed":
            result = replaced_result(result.exercise, changed)
        display(result)
        if result.status != "passed":
            raise not_passed(result)

    grade.__doc__ = L(f"Runs a check of {lab_module} for grading.", f"为评分运行 {lab_module} 的一项检查。")
    return grade
