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
