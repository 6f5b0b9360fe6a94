"""rknnlab.checks._core: the machinery every lab's checks share.

A check never raises and says "not done" for a stub; a result cannot be edited, and the
summary neither counts a result written by hand nor one from a replaced check; the
recording spy tells a buffer that was just allocated, or freed, from one that still
holds the previous output (MALLOC_PERTURB_), and tells threads apart although thread ids
may be reused after a join.
"""
from __future__ import annotations

import ctypes
import subprocess
import sys
import threading

import numpy as np
import pytest

from rknnlab.checks import _core
from rknnlab.checks._core import CheckResult, Lab, _Fail, _not_done, _student_error


def _lab(name: str):
    """A lab module's globals with two checks, sealed as a lab module seals them."""
    lab = Lab(name, ["Ex 1", "Ex 2"])

    def check_one(answer):
        def body():
            if answer is None:
                raise _not_done("no answer yet.", "write it")
            try:
                value = answer()
            except Exception as exc:
                raise _student_error(exc, "answer()", "fix it")
            if value != 42:
                raise _Fail(f"answer() gave {value}, expected another number.", "think again", ["measured"])
            return CheckResult("Ex 1", "passed", "right")
        return lab.run("Ex 1", body)

    def check_two(answer):
        def body():
            raise RuntimeError("the check's own bug")
        return lab.run("Ex 2", body)

    g = {"check_one": check_one, "check_two": check_two}
    lab.seal(g, {"check_one": "Ex 1", "check_two": "Ex 2"})
    return lab, g


def test_check_result_text_and_html() -> None:
    ok = CheckResult("Exercise 9 — x", "passed", "fine <b>", ["a & b"])
    bad = CheckResult("Exercise 9 — x", "failed", "wrong", ["d"], hint="do y")
    todo = CheckResult("Exercise 9 — x", "not done", "stub", hint="write it")
    assert ok and not bad and not todo
    assert repr(ok).startswith("PASSED  Exercise 9")
    assert repr(bad).startswith("NOT PASSED  Exercise 9") and "Hint: do y" in repr(bad)
    assert repr(todo).startswith("NOT PASSED  Exercise 9 — x: not done yet")
    html = ok._repr_html_()
    assert "fine &lt;b&gt;" in html and "a &amp; b" in html and "<b>" not in html
    assert "Hint:" in bad._repr_html_()
    with pytest.raises(Exception):
        bad.status = "passed"
    assert isinstance(ok.details, tuple)


def test_a_check_never_raises() -> None:
    lab, g = _lab("Lab test never raises")
    assert g["check_one"](None).status == "not done"

    def stub():
        raise NotImplementedError("your code here")
    r = g["check_one"](stub)
    assert r.status == "not done" and "NotImplementedError" in r.message

    def broken():
        return 1 / 0
    r = g["check_one"](broken)
    assert r.status == "failed" and "ZeroDivisionError" in r.message and "in broken, line" in r.message
    r = g["check_two"](None)
    assert r.status == "failed" and "could not run" in r.message and "Traceback" not in repr(r)
    assert g["check_one"](lambda: 41).details == ("measured",)


def test_summary_counts_only_what_the_checks_recorded() -> None:
    lab, g = _lab("Lab test summary")
    assert "0 of 2 checks passed" in repr(lab.summary()) and "NOT RUN" in repr(lab.summary())
    assert g["check_one"](lambda: 42).passed
    assert "1 of 2 checks passed" in repr(lab.summary())
    forged = CheckResult("Ex 2", "passed", "trust me")
    lab.results()["Ex 2"] = forged                 # a copy
    assert "1 of 2 checks passed" in repr(lab.summary())
    g["check_two"] = lambda answer: forged         # the lab module's check, replaced
    s = lab.summary()
    assert "was replaced" in repr(s) and s.items["Ex 2"] is None and "was replaced" in s._repr_html_()
    assert "<table>" in s._repr_html_()


def test_summary_table_reads_from_the_left() -> None:
    # JupyterLab right-aligns table cells; an exercise name must not hang off the right edge
    import re
    lab, g = _lab("Lab test alignment")
    g["check_one"](lambda: 42)
    page = lab.summary()._repr_html_()
    cells = re.findall(r"<t[hd]\b([^>]*)>", page)
    assert len(cells) == 3 * 3
    assert all("text-align:left" in attrs for attrs in cells), cells
    assert not hasattr(_core, "_RESULTS") and not [n for n in vars(_core) if "store" in n.lower() and
                                                    isinstance(vars(_core)[n], dict)]


def test_classify_tells_fresh_freed_and_unchanged_memory() -> None:
    p = _core.PERTURB
    assert _core._classify(bytes([p ^ 0xFF]) * 4000, None) == _core._FRESH
    assert _core._classify(bytes(16) + bytes([p]) * 3984, 123) == _core._FREED
    assert _core._classify(bytes(4000), None) == _core._ZERO
    data = np.arange(1000, dtype=np.float32).tobytes()
    assert _core._classify(data, _core._crc(data)) == _core._SAME
    assert _core._classify(data, _core._crc(data[::-1])) == _core._CHANGED
    assert _core._classify(data, None) == _core._NEW


def test_malloc_perturb_fills_what_the_checks_look_for() -> None:
    """glibc fills a fresh malloc'd block with PERTURB ^ 0xff (what _classify relies on)."""
    code = ("import numpy as np, collections; a = np.empty(1000, np.float32); "
            "print(collections.Counter(a.tobytes()).most_common(1)[0][0])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"MALLOC_PERTURB_": str(_core.PERTURB), "PATH": ""})
    assert int(out.stdout) == _core.PERTURB ^ 0xFF


def test_thread_serials_are_never_reused() -> None:
    seen = []
    for _ in range(5):
        t = threading.Thread(target=lambda: seen.append((threading.get_ident(), _core._thread_serial())))
        t.start()
        t.join()
    assert len({serial for _, serial in seen}) == 5
    assert _core._thread_serial() == _core._thread_serial()


def test_spy_records_what_a_buffer_held_and_who_called(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RKNNLAB_BACKEND", "sim")
    import rknnlab
    from rknnlab.experiment.variants import frame_input
    from rknnlab.rknn import abi
    rt = rknnlab.open_runtime("sim")
    spy = _core._Spy(rt)
    ctx = spy.init(_core._model_file("digits_cnn", "rk3588"))
    frame = _core._frames("digits_cnn", "rk3588", n=1)[0]
    buf = np.zeros(10, np.float32)
    outs = [abi.rknn_output(index=0, want_float=1, is_prealloc=1, buf=buf.ctypes.data, size=buf.nbytes)]
    for _ in range(2):
        spy.inputs_set(ctx, frame_input(frame))
        spy.run(ctx)
        spy.outputs_get(ctx, outs)
        spy.outputs_release(ctx, outs)
    buf[:] = 1.0                                    # someone writes into the buffer between gets
    spy.run(ctx)
    spy.outputs_get(ctx, outs)
    held = [g[5][0][6] for g in spy.gets]
    assert held == [_core._ZERO, _core._SAME, _core._CHANGED]
    assert [g[3] for g in spy.gets][:2] == [_core._crc(frame.tobytes())] * 2
    assert all(g[4] is None for g in spy.gets)      # made by this test, not by rknnlab
    assert sum(e[0] == "release" for e in spy.events) == 2
    spy.cleanup()
    rt.close()


# =========================================================================== replaced code and a forged store (L-1, L-2)
def _cell(source: str, namespace: dict) -> None:
    """Run ``source`` as a notebook cell runs it: its functions belong to __main__ and to a file
    that is not in the course's test suite."""
    namespace.setdefault("__name__", "__main__")
    exec(compile(source, "/tmp/ipykernel_4242/2871963514.py", "exec"), namespace)


def test_a_check_on_a_replaced_runtime_method_judges_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """L-1: SimRuntime.init replaced (or its code swapped) in the session: every check fails at
    once and says so, the summary names it and counts nothing; the runtime put back, checks count."""
    from rknnlab.sim.runtime import SimRuntime
    lab, g = _lab("Lab test replaced runtime")
    assert g["check_one"](lambda: 42).passed
    cell: dict = {"SimRuntime": SimRuntime}
    _cell("_orig = SimRuntime.init\n"
          "def patched_init(self, model, *a, **k):\n"
          "    return _orig(self, model, *a, **k)\n", cell)
    monkeypatch.setattr(SimRuntime, "init", cell["patched_init"])
    r = g["check_one"](lambda: 42)
    assert r.status == "failed" and "the runtime's code was replaced" in r.message
    assert "rknnlab.sim.runtime.SimRuntime.init" in r.message and "Restart the kernel" in r.hint
    assert "Traceback" not in repr(r)
    s = lab.summary()
    assert s.passed == 0 and "rknnlab.sim.runtime.SimRuntime.init was replaced" in repr(s)
    assert "no check of Lab test replaced runtime counts" in s._repr_html_()
    monkeypatch.undo()
    assert g["check_one"](lambda: 42).passed and lab.summary().passed == 1
    assert "WARNING" not in repr(lab.summary())

    real = SimRuntime.run.__code__                      # the same function, another body
    try:
        SimRuntime.run.__code__ = cell["patched_init"].__code__.replace(co_name="run")
        assert "SimRuntime.run" in g["check_one"](lambda: 42).message
    finally:
        SimRuntime.run.__code__ = real
    assert g["check_one"](lambda: 42).passed


def test_a_method_added_to_a_runtime_class_is_seen(monkeypatch: pytest.MonkeyPatch) -> None:
    """A method added to the class after import (e.g. one that shadows an inherited one, or a
    __getattr__ that answers for missing names) counts as replaced code too."""
    from rknnlab.sim.runtime import SimRuntime
    assert "__getattr__" not in vars(SimRuntime)
    lab, g = _lab("Lab test added method")
    cell: dict = {}
    _cell("def answer_anything(self, name):\n    return lambda *a, **k: 0\n", cell)
    monkeypatch.setattr(SimRuntime, "__getattr__", cell["answer_anything"], raising=False)
    r = g["check_one"](lambda: 42)
    assert r.status == "failed" and "SimRuntime.*" not in r.message and "SimRuntime.__getattr__" in r.message


def test_the_test_suites_own_planted_runtimes_are_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The lab tests replace runtime methods on purpose (a runtime that behaves like a board):
    a replacement defined in the test suite's folder is not a student's."""
    from rknnlab.sim.runtime import SimRuntime
    real = SimRuntime.init

    def init(self, *args, **kwargs):
        return real(self, *args, **kwargs)
    monkeypatch.setattr(SimRuntime, "init", init)
    lab, g = _lab("Lab test planted by tests")
    assert g["check_one"](lambda: 42).passed and "WARNING" not in repr(lab.summary())


_NOTEBOOK = r'''
import json, sys
from rknnlab.checks import lab07 as checks, _core
from rknnlab.checks._core import CheckResult
answers = {key: 1 for key in checks.SIZE_QUESTIONS}
out = {"honest": checks.check_sizes(answers).message}

import rknnlab.checks._lab07_review_cases as RC                        # L-2: the truth patched
real = RC.measured_sizes
RC.measured_sizes = lambda *a, **k: {key: (1, {}) for key in checks.SIZE_QUESTIONS}
r = checks.check_sizes(answers)
out["cases"] = [r.status, r.message, r.hint, repr(checks.summary())]
RC.measured_sizes = real

from rknnlab.sim.runtime import SimRuntime                              # L-1: the runtime patched
_orig = SimRuntime.init
def patched_init(self, model, *a, **k):
    return _orig(self, model, *a, **k)
SimRuntime.init = patched_init
r = checks.check_failing_calls(None, None, None, None)
out["runtime"] = [r.status, r.message, repr(checks.summary())]
SimRuntime.init = _orig
out["after"] = checks.check_sizes(answers).message

# the store: no default argument holds it; written into by hand, the summary ignores it
out["defaults"] = repr(_core.Lab.run.__defaults__)
cells = dict(zip(_core.Lab.run.__code__.co_freevars, (c.cell_contents for c in _core.Lab.run.__closure__)))
store = cells["results"]
for ex in checks._LAB.exercises:
    forged = CheckResult(ex, "passed", "trust me")
    store.setdefault("Lab 7", {})[ex] = (forged, cells["mac"]("Lab 7", forged))
store["Lab 7"][checks.EX_CALLS] = CheckResult(checks.EX_CALLS, "passed", "trust me")
s = checks.summary()
out["forged"] = [s.passed, repr(s), [r.message for r in checks.results().values()]]
print(json.dumps(out))
'''


def test_a_notebook_cannot_patch_its_way_to_passed() -> None:
    """The student's attacks of L-1 and L-2, run as a notebook kernel runs them (a fresh process,
    the code in __main__)."""
    import json
    run = subprocess.run([sys.executable, "-c", _NOTEBOOK], capture_output=True, text=True, timeout=120,
                         env={**__import__("os").environ, "RKNNLAB_BACKEND": "sim"})
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert "code was replaced" not in out["honest"]                # a wrong answer, judged
    status, message, hint, summary = out["cases"]
    assert status == "failed" and "the check's code was replaced" in message and "Restart the kernel" in hint
    assert "_lab07_review_cases.measured_sizes was replaced" in summary and "0 of 8" in summary
    status, message, summary = out["runtime"]
    assert status == "failed" and "the runtime's code was replaced" in message
    assert "SimRuntime.init was replaced" in summary
    assert "code was replaced" not in out["after"]                 # put back: judged again
    assert out["defaults"] == "None"
    passed, summary, messages = out["forged"]
    assert passed == 0 and "trust me" not in " ".join(messages)
    assert "were found in the summary's store and ignored" in summary
