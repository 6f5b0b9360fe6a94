"""The machinery every lab's checks share.  A lab module (``lab04.py``) uses it so:

.. code-block:: python

    from ._core import CheckResult, Lab, _Fail, _not_done, _student_error

    _LAB = Lab("Lab 4", ["Exercise 1 — ...", "Exercise 2 — ..."])

    def check_thing(student_function) -> CheckResult:
        def body() -> CheckResult:
            _require_function(student_function, "pass the function itself: check_thing(...)")
            try:
                answer = student_function(...)            # the student's code
            except Exception as exc:
                raise _student_error(exc, "student_function(...)", "hint")
            ...                                           # measure; raise _Fail(message, hint,
            return CheckResult(EX1, "passed", "...", details)   # details) when it is wrong
        return _LAB.run(EX1, body)

    summary = _LAB.summary          # the notebook's last cell: checks.summary()
    results = _LAB.results
    _LAB.seal(globals(), {"check_thing": EX1, ...})   # at the end of the module

A notebook imports one lab module: ``from rknnlab.checks import lab04 as checks``.

Rules the machinery enforces:

- A check never raises (``Lab.run``): a stub raising NotImplementedError or returning None
  gives "not done yet", an error in the student's code is reported with its line, the
  check's own failure is reported without a traceback.
- The summary resists accidental reassignment, not deliberate tampering in your own kernel:
  ``Lab.run`` keeps a frozen copy of each result, with an HMAC of its fields under a secret
  made at import, in a store only the closures of Lab's methods reach (no module attribute,
  default argument or one closure step holds both the store and the secret); it records a
  result only when Lab.run's own code was called by one of the lab's sealed check functions;
  ``results()`` returns copies; :meth:`Lab.summary` ignores a record whose HMAC is wrong (and
  says so), warns and does not count the exercise when a sealed check function or
  ``Lab.run`` itself has been replaced.
- Replaced code: at import this module imports the runtime's modules (the simulator,
  the native wrapper, ``rknnlab.run``) and records every function, class and method that
  rknnlab's modules define, and, when a lab module is sealed, everything its own modules
  hold (``lab07`` and ``_lab07_*``: the private cases too).  A check that starts after one of
  them was replaced (or its ``__code__`` swapped) judges nothing and says the runtime's (or
  the check's) code was replaced: restart the kernel; the summary names what was replaced
  and counts nothing for the lab.  Replacements defined in the course's test suite (a
  folder with a conftest.py) are allowed: the tests plant runtimes that behave otherwise.
  A determined student can still patch anything in their own kernel: the in-kernel summary
  is for the student; grading for a class re-runs the student's functions in a fresh kernel
  (issue 20).
- Helpers for measuring: :class:`_Spy` (a runtime that records every call the checks look
  at), :func:`_recorded_run` (a variant run by ``rknnlab.run`` in its own process through
  :func:`recording_runtime`, with the records returned), :func:`_reference_output`.
"""
from __future__ import annotations

import ctypes
import hashlib
import hmac
import itertools
import json
import html
import os
import re
import sys
import threading
import time
import traceback
import types
import zlib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..i18n import pick as L
from ..rknn import abi

_PACKAGE_DIR = os.path.realpath(Path(__file__).parents[1])   # rknnlab/: frames there are not the student's


# =========================================================================== results
@dataclass(frozen=True)
class CheckResult:
    """The outcome of one check.

    ``status`` is "passed", "failed" or "not done"; ``message`` says what is
    right or wrong, ``details`` are the measurements behind it, ``hint`` how
    to fix it.  ``bool(result)`` is ``result.passed``.  Frozen: the summary
    keeps its own copy anyway.
    """
    exercise: str
    status: str
    message: str
    details: Sequence[str] = field(default_factory=tuple)
    hint: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "details", tuple(self.details))

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    def __bool__(self) -> bool:
        return self.passed

    @property
    def headline(self) -> str:
        title = exercise_title(self.exercise)
        if self.passed:
            return L(f"PASSED  {title}", f"通过  {title}")
        if self.status == "not done":
            return L(f"NOT PASSED  {title}: not done yet", f"未通过  {title}：尚未完成")
        return L(f"NOT PASSED  {title}", f"未通过  {title}")

    def __repr__(self) -> str:
        lines = [self.headline, f"  {self.message}"]
        lines += [f"  - {d}" for d in self.details]
        if self.hint:
            lines.append(L(f"  Hint: {self.hint}", f"  提示：{self.hint}"))
        return "\n".join(lines)

    __str__ = __repr__

    def require(self) -> "CheckResult":
        """This result if it passed, else :class:`CheckNotPassed` (an AssertionError) saying
        why: a graded cell of a lab exported for nbgrader ends with ``.require()``, so the
        cell fails, and earns no points, when its check does not pass."""
        if self.status == "passed":
            return self
        raise CheckNotPassed(self)

    def _repr_html_(self) -> str:
        colour = {"passed": ("#1b7f3b", "#e9f7ee"), "not done": ("#9a6700", "#fff8e1")}.get(
            self.status, ("#b42318", "#fdecea"))
        items = "".join(f"<li>{html.escape(d)}</li>" for d in self.details)
        hint = (f'<p style="margin:0.4em 0 0 0"><strong>{L("Hint:", "提示：")}</strong> {html.escape(self.hint)}</p>'
                if self.hint else "")
        return (f'<div class="rknnlab-check rknnlab-check-{self.status.replace(" ", "-")}" '
                f'style="border-left:6px solid {colour[0]};background:{colour[1]};'
                f'padding:0.6em 0.9em;margin:0.3em 0;border-radius:4px">'
                f'<p style="margin:0;color:{colour[0]}"><strong>{html.escape(self.headline)}</strong></p>'
                f'<p style="margin:0.4em 0 0 0">{html.escape(self.message)}</p>'
                + (f'<ul style="margin:0.3em 0 0 0">{items}</ul>' if items else "")
                + hint + "</div>")


class CheckNotPassed(AssertionError):
    """A check that did not pass, raised where a pass is required (a graded cell). It shows
    as the check's own text, without a Python traceback: the student reads what is wrong and
    the hint, as in the lab."""

    def __init__(self, result: CheckResult) -> None:
        super().__init__(str(result))
        self.result = result

    def _render_traceback_(self) -> List[str]:    # IPython shows these lines instead of a traceback
        return [f"{type(self).__name__}:", *str(self.result).splitlines()]


class Summary:
    """What a lab's ``summary()`` returns: one line per exercise, and a warning for every
    check function (``checks.check_x``) or piece of rknnlab's code that was replaced in this
    session (what it affects does not count)."""

    def __init__(self, title: str, items: Dict[str, Optional[CheckResult]], replaced: Sequence[str] = (),
                 code_replaced: Sequence[str] = (), forged: int = 0) -> None:
        self.title = title
        self.items = items
        self.replaced = list(replaced)
        self.code_replaced = list(code_replaced)
        self.forged = forged

    @property
    def passed(self) -> int:
        return sum(bool(r and r.passed) for r in self.items.values())

    def _status(self, r: Optional[CheckResult]) -> Tuple[str, str]:
        if r is None:
            return L("NOT RUN", "未运行"), L("not run yet", "尚未运行")
        status = {"passed": L("passed", "通过"), "failed": L("failed", "未通过"),
                  "not done": L("not done", "尚未完成")}.get(r.status, r.status)
        return (L("PASSED", "通过") if r.passed else L("NOT PASSED", "未通过")), status

    def _warnings(self) -> List[str]:
        warnings = [L(f"checks.{n} was replaced in this session; a replaced check proves nothing "
                      "(restart the kernel and run the notebook as it is).",
                      f"本次会话中 checks.{n} 被替换了；被替换的检查证明不了任何东西"
                      "（请重启内核，按原样运行笔记本）。") for n in self.replaced]
        if self.code_replaced:
            names = _names(self.code_replaced)
            warnings.append(L(
                f"{names} {'was' if len(self.code_replaced) == 1 else 'were'} replaced in this session; "
                f"no check of {self.title} counts, a check on replaced code proves nothing (restart the "
                "kernel and run the notebook as it is).",
                f"本次会话中 {names} 被替换了；{lab_title(self.title)} 的检查都不计分，在被替换的代码上做的检查"
                "证明不了任何东西（请重启内核，按原样运行笔记本）。"))
        if self.forged:
            warnings.append(L(f"{self.forged} result(s) that no check recorded were found in the summary's store "
                              "and ignored.",
                              f"汇总的存储中有 {self.forged} 条结果不是由检查记录的，已忽略。"))
        return warnings

    def _headline(self) -> str:
        return L(f"{self.title}: {self.passed} of {len(self.items)} checks passed",
                 f"{lab_title(self.title)}：{len(self.items)} 项检查通过了 {self.passed} 项")

    def __repr__(self) -> str:
        lines = [self._headline()]
        lines += [f"  {_pad(self._status(r)[0], 10)}  {exercise_title(name)}" for name, r in self.items.items()]
        lines += [L(f"  WARNING: {w}", f"  警告：{w}") for w in self._warnings()]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        # every column is text, read from the left; JupyterLab right-aligns table cells
        left = 'style="text-align:left"'
        rows = "".join(
            f'<tr><td style="text-align:left; color:{"#1b7f3b" if r and r.passed else "#b42318"}"><strong>'
            f'{self._status(r)[0]}</strong></td><td {left}>{html.escape(exercise_title(name))}</td>'
            f'<td {left}>{html.escape(self._status(r)[1])}</td></tr>' for name, r in self.items.items())
        warn = "".join(f'<p style="color:#b42318"><strong>{L("WARNING:", "警告：")}</strong> {html.escape(w)}</p>'
                       for w in self._warnings())
        head = "".join(f"<th {left}>{h}</th>" for h in (L("result", "结果"), L("exercise", "练习"),
                                                          L("status", "状态")))
        return (f"<p><strong>{html.escape(self._headline())}</strong></p><table><tr>{head}</tr>"
                f"{rows}</table>"
                + warn)


def _pad(text: str, width: int) -> str:
    """``text`` padded to ``width`` columns as a terminal shows them: a Chinese character
    takes two (通过 is as wide as PASSED's first four letters)."""
    import unicodedata
    used = sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)
    return text + " " * max(0, width - used)


def _names(names: Sequence[str], most: int = 4) -> str:
    shown = ", ".join(names[:most])
    return shown + (L(f" and {len(names) - most} more", f" 及另外 {len(names) - most} 项") if len(names) > most else "")


#: the Chinese title of each exercise and lab, registered by :class:`Lab` (results keep the
#: English title as their key; what the reader sees is in the language rknnlab speaks)
_ZH_TITLES: Dict[str, str] = {}


def exercise_title(title: str) -> str:
    """An exercise's (or a lab's) title in the language rknnlab speaks."""
    return L(title, _ZH_TITLES.get(title, title))


lab_title = exercise_title


# =========================================================================== replaced code
#: modules of rknnlab.checks a lab's checks live in besides the lab module itself: its private
#: cases (``_lab05_cases``; Lab 7's ``_lab07_review``, ``_lab07_review_cases``, ...)
_LAB_MODULE = re.compile(r"^rknnlab\.checks\.lab(\d+)$")
#: the runtime and the measuring code every check relies on: imported with this module, so
#: that what they are at import is what the checks compare with (each is cheap to import)
_RUNTIME_MODULES = ("rknnlab.sim", "rknnlab.rknn.native", "rknnlab.experiment.runner",
                    "rknnlab.experiment.variants")


def _lab_modules(lab_module: str) -> Callable[[str], bool]:
    """Which loaded modules belong to the lab whose check module is ``lab_module``."""
    m = _LAB_MODULE.match(lab_module)
    prefix = f"rknnlab.checks._lab{m.group(1)}_" if m else None
    return lambda name: name == lab_module or bool(prefix and name.startswith(prefix))


def _shared_module(name: str) -> bool:
    """rknnlab's modules outside the lab check modules: the simulator, the native runtime's
    wrapper, rknnlab.run, the pipeline, and this machinery."""
    return (name == "rknnlab" or name.startswith("rknnlab.")) and (
        not name.startswith("rknnlab.checks.") or name == __name__)


def _code_of(obj: Any) -> Any:
    return getattr(obj, "__code__", None)


def _defined_in(obj: Any) -> Optional[str]:
    """The file that defined ``obj`` (a function, method, class, partial), if known."""
    for attr in ("__func__", "func", "fget"):
        obj = getattr(obj, attr, obj) if not isinstance(obj, type) else obj
    code = _code_of(obj)
    if code is not None:
        return code.co_filename
    module = sys.modules.get(getattr(obj, "__module__", None) or "")
    return getattr(module, "__file__", None)


def _from_the_test_suite(obj: Any) -> bool:
    """True for a replacement defined in the course's own test suite (a folder with a
    conftest.py): its tests plant runtimes that behave otherwise, on purpose, to try the
    checks against them.  A notebook cell's code never lives there."""
    where = _defined_in(obj)
    return bool(where) and os.path.isfile(os.path.join(os.path.dirname(where), "conftest.py"))


def _entries(module: Any, everything: bool) -> Dict[str, Tuple[Any, Any, Any, Any]]:
    """{display name: (owner, attribute, object, its code)} for what ``module`` holds: its
    functions and classes from rknnlab (``everything``: every function, class and builtin,
    imported ones too), and the methods (properties, static and class methods) of each class
    it defines."""
    out: Dict[str, Tuple[Any, Any, Any, Any]] = {}
    name = module.__name__
    for attr, value in list(vars(module).items()):
        if attr.startswith("__") or not isinstance(value, (type, types.FunctionType, types.BuiltinFunctionType)):
            continue
        home = str(getattr(value, "__module__", None) or "")
        ours = home == name
        if not (everything or home == "rknnlab" or home.startswith("rknnlab.")):   # re-exports too
            continue
        out[f"{name}.{attr}"] = (module, attr, value, _code_of(value))
        if isinstance(value, type) and ours and value is not Lab:
            for key, member in list(vars(value).items()):
                inner = getattr(member, "__func__", None) or getattr(member, "fget", None) or member
                if isinstance(inner, types.FunctionType):
                    out[f"{name}.{attr}.{key}"] = (value, key, member, inner.__code__)
            out[f"{name}.{attr}.*"] = (value, None, frozenset(vars(value)), None)
    return out


def _changed(owner: Any, attr: Any, obj: Any, code: Any) -> Dict[str, Any]:
    """{attribute: the object now there} where it differs from what was recorded (empty if
    the same); for a class's record of its names (attr None), the methods added since."""
    space = vars(owner)
    if attr is None:        # a method added later, that shadows an inherited one or answers anything
        return {k: space[k] for k in set(space) - obj if callable(space[k]) or hasattr(space[k], "__func__")}
    now = space.get(attr, _MISSING)
    if now is not obj:
        return {attr: now}
    inner = getattr(now, "__func__", None) or getattr(now, "fget", None) or now
    if code is not None and _code_of(inner) is not code:
        return {attr: inner}
    return {}


_MISSING = object()


def _make_code_watch() -> Tuple[Callable[..., None], Callable[[Callable[[str], bool], Sequence[str]], List[str]]]:
    """(watch, replaced): ``watch()`` records what every loaded rknnlab module holds (see
    :func:`_entries`), once per module (``watch(name)`` records module ``name`` anew);
    ``replaced(belongs, skip)`` names what differs now, in the shared modules and in the lab's
    own (``belongs``), leaving out the sealed check names ``skip`` (the summary reports those
    itself).  The records live only in these closures."""
    known: Dict[str, Dict[str, Tuple[Any, Any, Any, Any]]] = {}
    planted: Dict[str, List[str]] = {}     # replaced before the module was first recorded

    def watch(anew: str = "") -> None:
        known.pop(anew, None)               # a lab module (re)imported: its checks are defined anew
        for name, module in list(sys.modules.items()):
            if name in known or module is None or not (name == "rknnlab" or name.startswith("rknnlab.")):
                continue
            entries = _entries(module, everything=not _shared_module(name))
            known[name] = entries
            # a notebook cell's function in rknnlab's code before it was first recorded
            planted[name] = [n for n, (_, _, obj, _) in entries.items()
                             if getattr(obj, "__module__", None) == "__main__"]

    def replaced(belongs: Callable[[str], bool], skip: Sequence[str] = ()) -> List[str]:
        watch()
        found: List[str] = []
        for name, entries in known.items():
            if not (_shared_module(name) or belongs(name)):
                continue
            found += planted.get(name, [])
            for shown, (owner, attr, obj, code) in entries.items():
                if owner is sys.modules.get(name) and attr in skip:
                    continue
                for key, now in _changed(owner, attr, obj, code).items():
                    if not _from_the_test_suite(now):
                        found.append(shown if attr is not None else f"{shown[:-2]}.{key}")
        return found

    return watch, replaced


def _code_replaced_result(exercise: str, names: Sequence[str]) -> CheckResult:
    checks_own = all(n.startswith("rknnlab.checks.") for n in names)
    whose = L("the check's" if checks_own else "the runtime's", "检查" if checks_own else "运行时")
    return CheckResult(
        exercise, "failed",
        L(f"This check did not run: {whose} code was replaced in this session ({_names(list(names))}); "
          "a check on replaced code proves nothing.",
          f"这项检查没有运行：本次会话中{whose}的代码被替换了（{_names(list(names))}）；"
          "在被替换的代码上做的检查证明不了任何东西。"),
        hint=L("Restart the kernel and run the notebook as it is, without replacing rknnlab's classes or "
               "functions.",
               "请重启内核，按原样运行笔记本，不要替换 rknnlab 的类或函数。"))


def _make_lab_methods(run_check: Callable[[str, Callable[[], CheckResult]], CheckResult]) -> Tuple[Any, ...]:
    """Lab's run, results, summary and seal, sharing a result store that only these closures
    reach.  A result is stored with an HMAC of its fields under a secret made now, and only
    when Lab.run's own code, called by one of the lab's sealed check functions, stores it;
    :meth:`Lab.summary` ignores a record whose HMAC is wrong (one written into the store by
    hand).  A speed bump, not security: grading re-runs the student's cells in a fresh kernel."""
    results: Dict[str, Dict[str, Tuple[CheckResult, bytes]]] = {}
    sealed: Dict[str, Dict[str, Tuple[Any, str, Any]]] = {}
    lab_of: Dict[str, Callable[[str], bool]] = {}
    secret = os.urandom(32)
    watch, code_replaced = _make_code_watch()

    def mac(lab: str, r: CheckResult) -> bytes:
        if sys._getframe(1).f_code not in signers:     # a notebook cell calling it gets no HMAC
            return b""
        fields = json.dumps([lab, r.exercise, r.status, r.message, list(r.details), r.hint], default=str)
        return hmac.new(secret, fields.encode(), hashlib.sha256).digest()

    def verified(lab: str) -> Tuple[Dict[str, CheckResult], int]:
        good = {}
        for k, record in results.get(lab, {}).items():
            r, m = record if isinstance(record, tuple) and len(record) == 2 else (None, None)
            if isinstance(r, CheckResult) and isinstance(m, bytes) and r.exercise == k and m and \
                    hmac.compare_digest(m, mac(lab, r)):
                good[k] = replace(r)
        return good, len(results.get(lab, {})) - len(good)

    def replaced_code(lab: str) -> List[str]:
        return code_replaced(lab_of.get(lab, lambda name: False), list(sealed.get(lab, {})))

    def run(self: "Lab", exercise: str, body: Callable[[], CheckResult]) -> CheckResult:
        """Run a check's body; never raises; records the result for :meth:`summary` when one of
        the lab's sealed check functions called it (a notebook cell calling it records nothing).
        A check that starts after rknnlab's runtime or this lab's check code was replaced in
        the session judges nothing and says so."""
        changed = replaced_code(self.title)
        result = _code_replaced_result(exercise, changed) if changed else run_check(exercise, body)
        caller = sys._getframe(1).f_code
        if any(code is caller for _, _, code in sealed.get(self.title, {}).values()):
            results.setdefault(self.title, {})[result.exercise] = (replace(result), mac(self.title, result))
        return result

    def read(self: "Lab") -> Dict[str, CheckResult]:
        """The latest result of every check of this lab run in this session (copies)."""
        return verified(self.title)[0]

    def summary(self: "Lab") -> Summary:
        """Every exercise of the lab, passed or not (or not run yet), from the results the
        check functions recorded themselves."""
        got, forged = verified(self.title)
        originals = sealed.get(self.title, {})
        replaced = [name for name, (f, _, code) in originals.items()
                    if self._module.get(name) is not f or _code_of(f) is not code]
        for name in replaced:   # its exercise does not count, whatever the original once recorded
            got.pop(originals[name][1], None)
        if type(self).run is not run or "run" in vars(self):
            replaced.append("_LAB.run")     # every record is then in doubt
            got = {}
        changed = replaced_code(self.title)
        if changed:
            got = {}
        return Summary(self.title, {ex: got.get(ex) for ex in self.exercises}, replaced, changed, forged)

    def seal(self: "Lab", module_globals: Dict[str, Any], checks: Dict[str, str]) -> None:
        """Remember the lab module's check functions ({name: exercise}): :meth:`summary`
        warns when one is replaced and does not count its exercise.  (Re)importing the lab
        module defines its checks anew: its record starts clean."""
        self._module = module_globals
        watch(str(module_globals.get("__name__", "")))
        lab_of[self.title] = _lab_modules(str(module_globals.get("__name__", "")))
        sealed[self.title] = {n: (module_globals[n], ex, _code_of(module_globals[n])) for n, ex in checks.items()}
        results.pop(self.title, None)

    signers = (run.__code__, verified.__code__)
    return run, read, summary, seal, watch


class Lab:
    """One lab's checks: runs them (:meth:`run`) and summarises them (:meth:`summary`).
    The four methods are made below, by :func:`_make_lab_methods`."""

    def __init__(self, title: str, exercises: Sequence[str],
                 zh: Optional[Tuple[str, Sequence[str]]] = None) -> None:
        """``zh``: the lab's title and its exercises' titles in Chinese, in the same order."""
        self.title = title
        self.exercises = list(exercises)
        self._module: Dict[str, Any] = {}
        if zh is not None:
            zh_title, zh_exercises = zh
            if len(zh_exercises) != len(self.exercises):
                raise ValueError(f"{title}: {len(zh_exercises)} Chinese titles for {len(self.exercises)} exercises")  # en-only
            _ZH_TITLES[title] = zh_title
            _ZH_TITLES.update(zip(self.exercises, zh_exercises))


class _Fail(Exception):
    """Raised inside a check to stop with a failure (never leaves the package)."""

    def __init__(self, message: str, hint: str = "", details: Sequence[str] = (),
                 status: str = "failed") -> None:
        super().__init__(message)
        self.message, self.hint, self.details, self.status = message, hint, list(details), status


def _whole_number(value: Any) -> Optional[int]:
    """A student's answer as an int when it is a whole number (int, numpy int, or a float like
    4.0), else None; a bool is not a number here (True would pass as 1)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return int(value)
    return None


def _not_done(what: str, hint: str) -> _Fail:
    return _Fail(what, hint, status="not done")


def _where(exc: BaseException) -> str:
    """' (in my_variant, line 7: rt.outputs_get(ctx, outs))' for the innermost frame outside rknnlab."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if not f.filename.startswith(_PACKAGE_DIR)]
    if not frames:
        return ""
    f = frames[-1]
    line = f" `{f.line.strip()}`" if f.line else ""
    return L(f" (in {f.name}, line {f.lineno}:{line})", f"（{f.name} 第 {f.lineno} 行：{line}）")


def _require_function(answer: Any, how_to_pass: str) -> None:
    """Not done yet unless the student passed a function (not its result, not None);
    ``how_to_pass`` is the hint, e.g. "pass the function itself: check_x(x)"."""
    if not callable(answer):
        raise _not_done(L(f"expected your function, got {type(answer).__name__}.",
                          f"这里要的是你的函数，收到的是 {type(answer).__name__}。"), how_to_pass)


def _student_error(exc: BaseException, what: str, hint: str) -> _Fail:
    """A _Fail for an exception raised by the student's code (NotImplementedError: not done)."""
    if isinstance(exc, NotImplementedError):
        text = str(exc) or L("the stub raises NotImplementedError", "占位代码抛出 NotImplementedError")
        return _not_done(L(f"{what} still raises NotImplementedError: {text.rstrip('.')}.",
                           f"{what} 仍然抛出 NotImplementedError（“{text.rstrip('.')}”）：尚未完成。"), hint)
    return _Fail(L(f"{what} raised {type(exc).__name__}: {exc}{_where(exc)}",
                   f"{what} 抛出了 {type(exc).__name__}：{exc}{_where(exc)}"), hint)


def _run_check(exercise: str, body: Callable[[], CheckResult]) -> CheckResult:
    try:
        result = body()
    except _Fail as f:
        result = CheckResult(exercise, f.status, f.message, f.details, f.hint)
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # the check's own failure: still no traceback in the notebook
        result = CheckResult(
            exercise, "failed",
            L(f"The check could not run: {type(exc).__name__}: {exc}{_where(exc)}",
              f"检查无法运行：{type(exc).__name__}：{exc}{_where(exc)}"),
            hint=L("If the message names your code, fix that; otherwise please report this to the "
                   "course's authors with the message above.",
                   "如果消息指向你的代码，请修改它；否则请把上面的消息报告给课程作者。"))
    return result


Lab.run, Lab.results, Lab.summary, Lab.seal, _watch = _make_lab_methods(_run_check)


# =========================================================================== helpers for measuring
def _fresh_seed() -> int:
    """A seed no student can know in advance."""
    return int.from_bytes(os.urandom(8), "little")


def _destroy_contexts(rt: Any, contexts: List[int]) -> None:
    """Destroy every context of ``contexts`` the student's code left alive, whatever state it is
    in (one that refuses does not stop the others), and empty the list."""
    for ctx in list(contexts):
        try:
            rt.destroy(ctx)
        except Exception:
            pass
    contexts.clear()


def _soc_of(rt: Any) -> str:
    soc = getattr(rt, "soc", None)
    if not soc:
        from .. import board
        soc = board.read_board().soc or "rk3588"
    return {"rk3566": "rk3568"}.get(soc, soc)


def _current_soc() -> str:
    """The SoC whose models the runtime at hand runs (the board's, or the simulator's)."""
    from .. import ENV_SIM_SOC, board
    chosen, _ = board.choose_backend("auto")
    soc = (board.read_board().soc if chosen == "native" else os.environ.get(ENV_SIM_SOC)) or "rk3588"
    return {"rk3566": "rk3568"}.get(soc.lower(), soc.lower())


def _model_file(name: str, soc: str) -> str:
    from .. import models
    return str(models.model_path(name, soc))


def _open_runtime() -> Any:
    from .. import open_runtime
    return open_runtime()


def _frames(model: str, soc: str, n: int = 4, seed: int = 0) -> List[np.ndarray]:
    """The seeded uint8 NHWC frames rknnlab.run gives a variant (the recipe of its child)."""
    from ..experiment.runner import resolve_model
    shape = tuple(resolve_model(model, soc)["input_shape"])
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, size=shape, dtype=np.uint8) for _ in range(n)]


def _out_bytes(attr: abi.rknn_tensor_attr, want_float: int) -> int:
    """The course's rule: want_float = 1: n_elems x 4 bytes (float32); want_float = 0:
    attr.size bytes (the output's own type)."""
    return int(attr.n_elems) * 4 if want_float else int(attr.size)


def _crc(data: bytes) -> int:
    return zlib.crc32(data)


#: MALLOC_PERTURB_ of the processes the checks record: glibc then fills the blocks it
#: hands out with 0x5A (165 ^ 0xff) and the blocks it takes back with 0xA5, so a buffer's
#: bytes say whether it was allocated, or freed, since it was last written.  glibc's
#: per-thread cache (blocks up to 1,032 B) skips the fill, so the recorded run turns it off
#: too (rknnlab.watch.malloc_perturb)
PERTURB = 165
_FRESH, _FREED, _ZERO, _SAME, _CHANGED, _NEW = range(6)
#: the answers a student picks from (en-only: they are values the student's code returns)
BEFORE_NAMES = ("freshly allocated", "freed", "zero-filled (freshly allocated)", "unchanged",  # en-only
                "changed by something else", "never written before")  # en-only


def _classify(data: bytes, last_crc: Optional[int]) -> int:
    """What a caller's buffer held just before rknn_outputs_get wrote into it."""
    if not data:
        return _NEW
    if last_crc is not None and _crc(data) == last_crc:
        return _SAME
    fill = data.count(PERTURB ^ 0xFF)
    if fill >= len(data) // 2:
        return _FRESH
    if data.count(PERTURB) >= len(data) // 2:
        return _FREED
    if data.count(0) == len(data):
        return _ZERO
    return _CHANGED if last_crc is not None else _NEW


_SERIAL = itertools.count(1)


def _thread_serial() -> int:
    """A number for the running thread that is never given to another thread (thread ids
    may be reused once a thread has been joined)."""
    t = threading.current_thread()
    serial = getattr(t, "_rknnlab_checks_serial", None)
    if serial is None:
        serial = next(_SERIAL)
        t._rknnlab_checks_serial = serial   # type: ignore[attr-defined]
    return serial


_THIS_FILE = os.path.realpath(__file__)
_INSTRUMENT = os.path.realpath(Path(__file__).parents[1] / "experiment" / "instrument.py")


_REAL: Dict[str, str] = {}


def _real(filename: str) -> str:
    if filename not in _REAL:
        _REAL[filename] = os.path.realpath(filename)
    return _REAL[filename]


def _caller_in_rknnlab() -> Optional[str]:
    """'module.function' when the runtime call was made by rknnlab's own code (e.g. a
    built-in variant) rather than the student's; None when the student's code made it."""
    f = sys._getframe(2)
    while f is not None:
        name = _real(f.f_code.co_filename)
        if name not in (_THIS_FILE, _INSTRUMENT):
            if name.startswith(_PACKAGE_DIR + os.sep):
                module = f.f_globals.get("__name__", "rknnlab")
                return f"{module}.{f.f_code.co_name}"
            return None
        f = f.f_back
    return None


class _Spy:
    """A runtime that passes every call through and records, in order, what the checks look at.

    ``events``: ("set", ctx, frame crc), ("run", ctx, inputs set since the last run?),
    ("get", record), ("release", ctx, thread), ("create_mem", ctx).  A get's record is a
    tuple (ctx, thread serial, time ns, frame crc of the inputs the run saw, caller in
    rknnlab, outputs, heap in use after the get (glibc mallinfo2; None in the notebook's
    own process)); each output is (index, is_prealloc, want_float, buf, size given,
    size after, what the buffer held before (a _FRESH ... _NEW code), crc of the bytes
    written).  Tuples keep the recording's own memory small: the checks measure RSS in the
    same run."""

    def __init__(self, rt: Any) -> None:
        self._rt = rt
        self.backend = getattr(rt, "backend", "")
        self.soc = getattr(rt, "soc", None)
        # explicit attributes, not only __getattr__: the harness's InstrumentedRuntime wraps
        # the methods that dir() lists
        for name in dir(rt):
            if not name.startswith("_") and not hasattr(type(self), name) and callable(getattr(rt, name, None)):
                setattr(self, name, getattr(rt, name))
        self.contexts: List[int] = []
        self.queries: List[Tuple[int, int]] = []
        self.events: List[tuple] = []
        self._frame: Dict[int, Optional[int]] = {}
        self._set_since_run: Dict[int, bool] = {}
        self._run_frame: Dict[int, Tuple[Optional[int], bool]] = {}
        self._written: Dict[int, int] = {}
        self._need: Dict[Tuple[int, int, int], int] = {}
        self._heap: Any = None
        self._lock = threading.Lock()

    def _emit(self, event: tuple) -> None:
        """Keep one event (called with the lock held)."""
        self.events.append(event)

    def _needed(self, ctx: int, index: int, want_float: int) -> int:
        key = (ctx, index, want_float)
        if key not in self._need:
            attr = self._rt.query(ctx, abi.RKNN_QUERY_OUTPUT_ATTR, abi.rknn_tensor_attr(index=index))
            self._need[key] = _out_bytes(attr, want_float)
        return self._need[key]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._rt, name)

    @property
    def gets(self) -> List[tuple]:
        return [e[1] for e in self.events if e[0] == "get"]

    def init(self, *args: Any, **kwargs: Any) -> int:
        ctx = self._rt.init(*args, **kwargs)
        with self._lock:
            self.contexts.append(ctx)
        return ctx

    def dup_context(self, ctx: int) -> int:
        new = self._rt.dup_context(ctx)
        with self._lock:
            self.contexts.append(new)
        return new

    def destroy(self, ctx: int) -> int:
        ret = self._rt.destroy(ctx)
        with self._lock:
            if ctx in self.contexts:
                self.contexts.remove(ctx)
        return ret

    def query(self, ctx: int, cmd: int, info: Any = None) -> Any:
        with self._lock:
            self.queries.append((ctx, cmd))
        return self._rt.query(ctx, cmd, info)

    def inputs_set(self, ctx: int, inputs: Sequence[abi.rknn_input]) -> int:
        crc = 0
        for i in inputs:
            crc = zlib.crc32(ctypes.string_at(i.buf, i.size) if i.buf and i.size else b"", crc)
        ret = self._rt.inputs_set(ctx, inputs)
        with self._lock:
            self._frame[ctx] = crc
            self._set_since_run[ctx] = True
            self._emit(("set", ctx, crc))
        return ret

    def run(self, ctx: int, *args: Any, **kwargs: Any) -> int:
        ret = self._rt.run(ctx, *args, **kwargs)
        with self._lock:
            fresh = self._set_since_run.pop(ctx, False)
            self._run_frame[ctx] = (self._frame.get(ctx), fresh)
            self._emit(("run", ctx, fresh))
        return ret

    def create_mem(self, ctx: int, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            self._emit(("create_mem", ctx))
        return self._rt.create_mem(ctx, *args, **kwargs)

    def outputs_get(self, ctx: int, outputs: Sequence[abi.rknn_output], extend: Any = None) -> int:
        caller = _caller_in_rknnlab()
        before = []
        for o in outputs:
            pre, buf, size = int(o.is_prealloc), o.buf or 0, int(o.size)
            held = _NEW
            if pre and buf and size:
                with self._lock:
                    last = self._written.get(buf)
                held = _classify(ctypes.string_at(buf, size), last)
            before.append((int(o.index), pre, int(o.want_float), buf, size, held))
        ret = self._rt.outputs_get(ctx, outputs, extend)
        outs = []
        for (index, pre, wf, buf, size, held), o in zip(before, outputs):
            # the values: the bytes the output needs (a caller's buffer may be larger)
            n = min(int(o.size), self._needed(ctx, index, wf)) if o.buf else 0
            crc = _crc(ctypes.string_at(o.buf, n) if n else b"")
            if pre and buf:
                with self._lock:
                    self._written[buf] = _crc(ctypes.string_at(buf, size)) if size else crc
            outs.append((index, pre, wf, o.buf or 0, size, int(o.size), held, crc))
        heap = self._heap.sample()["heap_in_use_bytes"] if self._heap is not None else None
        with self._lock:
            frame, _fresh = self._run_frame.get(ctx, (None, False))
            self._emit(("get", (ctx, _thread_serial(), time.perf_counter_ns(), frame, caller, tuple(outs),
                                heap)))
        return ret

    def outputs_release(self, ctx: int, outputs: Sequence[abi.rknn_output]) -> int:
        with self._lock:
            self._emit(("release", ctx, _thread_serial()))
        return self._rt.outputs_release(ctx, outputs)

    def cleanup(self) -> None:
        """Destroy the contexts the student's code left behind."""
        _destroy_contexts(self._rt, self.contexts)


#: environment variable naming the file a :func:`recording_runtime` writes its records to
RECORD_ENV = "RKNNLAB_CHECKS_RECORD"


class _FileSpy(_Spy):
    """A :class:`_Spy` for ``rknnlab.run(backend="rknnlab.checks._core:recording_runtime")``:
    the variant runs in its own process (a crash cannot take the notebook down) and the
    records go to the file named by $RKNNLAB_CHECKS_RECORD, one JSON line per event."""

    def __init__(self, rt: Any, path: str) -> None:
        super().__init__(rt)
        # one JSON line per event, written at once: the variant's process keeps no growing
        # record (its RSS is measured), and a crash leaves what happened before it
        self._file = open(path, "w", buffering=1)
        from ..probe import Heap
        heap = Heap()
        self._heap = heap if heap.available else None

    def _emit(self, event: tuple) -> None:
        self._file.write(json.dumps(event) + "\n")

    def close(self) -> None:
        self._file.close()
        self._rt.close()


def recording_runtime() -> Any:
    """The runtime ``open_runtime()`` gives, recording what the checks look at (see
    :class:`_FileSpy`); a backend factory for ``rknnlab.run``."""
    return _FileSpy(_open_runtime(), os.environ[RECORD_ENV])


def _recorded_run(variant: Callable[[Any], None], model: str, soc: str, iterations: int,
                  warmup: int = 0, sample_hz: float = 0) -> Tuple[Any, Any, Dict[str, Any]]:
    """Run ``variant`` with ``rknnlab.run`` in a fresh process through
    :func:`recording_runtime`, with MALLOC_PERTURB_ set and glibc's tcache off: (the Result, its VariantRun, the
    records; empty if the process left none).  Every iteration is recorded: there is no
    second, unrecorded run for a variant to behave differently in."""
    import tempfile
    import rknnlab
    fd, path = tempfile.mkstemp(prefix="rknnlab-check-", suffix=".json")
    os.close(fd)
    os.unlink(path)
    from rknnlab import watch
    saved = os.environ.get(RECORD_ENV)
    os.environ[RECORD_ENV] = path
    try:
        with watch.malloc_perturb(str(PERTURB)):
            res = rknnlab.run(variant, model=model, soc=soc, iterations=iterations, warmup=warmup,
                              sample_hz=sample_hz, backend=f"{__name__}:recording_runtime", timeout=120,
                              progress=False)  # the check prints its own verdict; no bar before it
    finally:
        if saved is None:
            os.environ.pop(RECORD_ENV, None)
        else:
            os.environ[RECORD_ENV] = saved
    events = []
    try:
        with open(path) as f:
            for line in f:
                try:
                    events.append(json.loads(line))
                except ValueError:   # the last line of a process that died while writing it
                    break
        os.unlink(path)
    except OSError:
        pass
    return res, res.runs[0], {"events": events}


def _reference_outputs(rt: Any, model_file: str, frames: Sequence[np.ndarray],
                       want_floats: Sequence[int] = (0, 1)) -> Dict[Tuple[int, int, int], int]:
    """{(frame crc, output index, want_float): crc of the bytes a runtime-allocated
    rknn_outputs_get gives}, on the check's own context."""
    from ..experiment.variants import frame_input
    ctx = rt.init(model_file)
    try:
        n_out = rt.query(ctx, abi.RKNN_QUERY_IN_OUT_NUM).n_output
        ref: Dict[Tuple[int, int, int], int] = {}
        for frame in frames:
            key = zlib.crc32(frame.tobytes())
            rt.inputs_set(ctx, frame_input(frame))
            rt.run(ctx)
            for wf in want_floats:
                outs = [abi.rknn_output(index=k, want_float=wf, is_prealloc=0) for k in range(n_out)]
                rt.outputs_get(ctx, outs)
                for o in outs:
                    ref[(key, int(o.index), wf)] = _crc(ctypes.string_at(o.buf, o.size))
                rt.outputs_release(ctx, outs)
        return ref
    finally:
        rt.destroy(ctx)


def _variant_error(run: Any, what: str) -> str:
    """What went wrong in a variant run by rknnlab.run, with the student's line if found."""
    if run.status != "error":
        return f"{what}: {run.error or run.status}"
    where = ""
    frames = re.findall(r'File "<variant [^>]*>", line (\d+), in (\S+)\n\s*(.*)', run.traceback or "")
    if frames:
        line, func, src = frames[-1]
        where = L(f" (in {func}, line {line}: `{src.strip()}`)" if src.strip() else f" (in {func}, line {line})",
                  f"（{func} 第 {line} 行：`{src.strip()}`）" if src.strip() else f"（{func} 第 {line} 行）")
    return L(f"{what} raised {run.error}{where}", f"{what} 抛出了 {run.error}{where}")


def _record_the_runtime() -> None:
    """Import the runtime's modules now and record what they define (see _RUNTIME_MODULES):
    a class replaced later, even before the first check, is then told apart."""
    import importlib
    for name in _RUNTIME_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:      # an optional part missing: the checks that need it say so
            pass
    _watch()


_record_the_runtime()
