"""rknnlab.checks (the lab checks) and Lab 4, on the simulator.

Each check passes the reference solution and fails, gracefully and with the expected
message, the untouched stub and wrong solutions (a variant that leaks, a reuse test that
trusts pointer equality, a wrong classification, a guard that does not reallocate, two
threads that still share a buffer).  A check never raises.  Then the lab notebook runs
twice with nbclient: as is (instructor edition: every check PASSED) and with the cells
tagged ``solution`` removed (student edition: runs to the end, every check NOT PASSED
with its message).
"""
from __future__ import annotations

import ast
import os
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pandas")
pytest.importorskip("onnxruntime")

import rknnlab  # noqa: E402
from rknnlab import probe  # noqa: E402
from rknnlab.checks import lab04 as checks  # noqa: E402
from rknnlab.experiment.variants import frame_input, query_io  # noqa: E402
from rknnlab.rknn import abi, buffers  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
LAB = ROOT / "labs" / "lab04_output_reuse.ipynb"


@pytest.fixture(autouse=True)
def _simulator(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RKNNLAB_BACKEND", "sim")


def _stub(*args, **kwargs):
    raise NotImplementedError("your code here")


# =========================================================================== CheckResult
def test_check_result_text_and_html() -> None:
    ok = checks.CheckResult("Exercise 9 — x", "passed", "fine <b>", ["a & b"])
    bad = checks.CheckResult("Exercise 9 — x", "failed", "wrong", ["d"], hint="do y")
    todo = checks.CheckResult("Exercise 9 — x", "not done", "stub", hint="write it")
    assert ok and not bad and not todo
    assert repr(ok).startswith("PASSED  Exercise 9")
    assert repr(bad).startswith("NOT PASSED  Exercise 9") and "Hint: do y" in repr(bad)
    assert repr(todo).startswith("NOT PASSED  Exercise 9 — x: not done yet")
    html = ok._repr_html_()
    assert "fine &lt;b&gt;" in html and "a &amp; b" in html and "<b>" not in html
    assert "Hint:" in bad._repr_html_()


@pytest.mark.parametrize("check", [checks.check_prealloc_variant, checks.check_reuse_detector,
                                   checks.check_which_is_which, checks.check_output_guard,
                                   checks.check_two_threads])
def test_checks_never_raise_on_nothing(check) -> None:
    result = check(None)
    assert isinstance(result, checks.CheckResult)
    assert result.status == "not done" and not result.passed


# =========================================================================== exercise 1
def prealloc_reference(lab):
    rt = lab.rt
    ctx = rt.init(lab.model_path)
    _, out_attrs = query_io(rt, ctx)
    keep, outs = [], []
    for attr in out_attrs:
        buf = np.empty(attr.n_elems, dtype=np.float32)
        keep.append(buf)
        outs.append(abi.rknn_output(index=attr.index, want_float=1, is_prealloc=1,
                                    buf=buf.ctypes.data, size=buf.nbytes))
    for i in lab.loop():
        rt.inputs_set(ctx, frame_input(lab.input(i)))
        rt.run(ctx)
        rt.outputs_get(ctx, outs)
    rt.destroy(ctx)


def prealloc_keeps_history(lab):
    """Right outputs, but a copy of every output is kept: the process grows."""
    rt = lab.rt
    ctx = rt.init(lab.model_path)
    _, out_attrs = query_io(rt, ctx)
    buf = np.empty(out_attrs[0].n_elems, dtype=np.float32)
    outs = [abi.rknn_output(index=0, want_float=1, is_prealloc=1, buf=buf.ctypes.data, size=buf.nbytes)]
    history = []
    for i in lab.loop():
        rt.inputs_set(ctx, frame_input(lab.input(i)))
        rt.run(ctx)
        rt.outputs_get(ctx, outs)
        history.append(buf.copy())
    rt.destroy(ctx)


def runtime_allocates(lab):
    """is_prealloc = 0 with release: not a prealloc variant."""
    rt = lab.rt
    ctx = rt.init(lab.model_path)
    for i in lab.loop():
        rt.inputs_set(ctx, frame_input(lab.input(i)))
        rt.run(ctx)
        outs = [abi.rknn_output(index=0, want_float=1, is_prealloc=0)]
        rt.outputs_get(ctx, outs)
        rt.outputs_release(ctx, outs)
    rt.destroy(ctx)


def int8_sized_float_buffer(lab):
    """want_float = 1 into n_elems bytes: the runtime refuses the buffer."""
    rt = lab.rt
    ctx = rt.init(lab.model_path)
    _, out_attrs = query_io(rt, ctx)
    buf = np.empty(out_attrs[0].n_elems, dtype=np.int8)
    outs = [abi.rknn_output(index=0, want_float=1, is_prealloc=1, buf=buf.ctypes.data, size=buf.nbytes)]
    for i in lab.loop():
        rt.inputs_set(ctx, frame_input(lab.input(i)))
        rt.run(ctx)
        rt.outputs_get(ctx, outs)
    rt.destroy(ctx)


def never_sets_inputs(lab):
    """Seed 000's mistake: rknn_run with no rknn_inputs_set."""
    rt = lab.rt
    ctx = rt.init(lab.model_path)
    _, out_attrs = query_io(rt, ctx)
    buf = np.empty(out_attrs[0].n_elems, dtype=np.float32)
    outs = [abi.rknn_output(index=0, want_float=1, is_prealloc=1, buf=buf.ctypes.data, size=buf.nbytes)]
    for _ in lab.loop():
        rt.run(ctx)
        rt.outputs_get(ctx, outs)
    rt.destroy(ctx)


def new_buffer_every_iteration(lab):
    """is_prealloc = 1, but a fresh buffer per iteration: still an allocation per call."""
    rt = lab.rt
    ctx = rt.init(lab.model_path)
    _, out_attrs = query_io(rt, ctx)
    buf = None
    for i in lab.loop():
        buf = np.empty(out_attrs[0].n_elems, dtype=np.float32)
        outs = [abi.rknn_output(index=0, want_float=1, is_prealloc=1, buf=buf.ctypes.data, size=buf.nbytes)]
        rt.inputs_set(ctx, frame_input(lab.input(i)))
        rt.run(ctx)
        rt.outputs_get(ctx, outs)
    rt.destroy(ctx)


def writes_to_a_bad_address(lab):
    """is_prealloc = 1 with buf pointing nowhere: the runtime writes there and the process dies."""
    rt = lab.rt
    ctx = rt.init(lab.model_path)
    _, out_attrs = query_io(rt, ctx)
    outs = [abi.rknn_output(index=0, want_float=1, is_prealloc=1, buf=16, size=out_attrs[0].n_elems * 4)]
    for i in lab.loop():
        rt.inputs_set(ctx, frame_input(lab.input(i)))
        rt.run(ctx)
        rt.outputs_get(ctx, outs)
    rt.destroy(ctx)


def test_ex1_reference_passes() -> None:
    result = checks.check_prealloc_variant(prealloc_reference)
    assert result.passed, result
    assert any("RSS" in d for d in result.details)


def test_ex1_stub_not_done() -> None:
    result = checks.check_prealloc_variant(_stub)
    assert result.status == "not done"
    assert "NotImplementedError" in result.message and result.hint


@pytest.mark.parametrize("variant, expected", [
    (runtime_allocates, "is_prealloc = 0"),
    (never_sets_inputs, "before any rknn_inputs_set"),
    (new_buffer_every_iteration, "different buffers"),
    (int8_sized_float_buffer, "RKNN_ERR_PARAM_INVALID"),
])
def test_ex1_wrong_variants_fail_in_process(variant, expected) -> None:
    result = checks.check_prealloc_variant(variant)
    assert result.status == "failed", result
    assert expected in result.message, result
    assert result.hint


def test_ex1_wrong_variant_names_the_line() -> None:
    result = checks.check_prealloc_variant(int8_sized_float_buffer)
    assert "in int8_sized_float_buffer, line" in result.message
    assert "rt.outputs_get(ctx, outs)" in result.message


def test_ex1_crash_is_reported_not_suffered() -> None:
    result = checks.check_prealloc_variant(writes_to_a_bad_address)
    assert result.status == "failed", result
    assert "SIGSEGV" in result.message and "the notebook is fine" in result.message


def test_ex1_leaking_variant_fails_on_rss() -> None:
    result = checks.check_prealloc_variant(prealloc_keeps_history)
    assert result.status == "failed", result
    assert "grows by about" in result.message
    assert any("RSS" in d for d in result.details)


# =========================================================================== exercise 2
def reuse_reference(variant) -> bool:
    def measured(lab):
        heap = probe.Heap()
        real_get = lab.rt.outputs_get

        def outputs_get(ctx, outputs, extend=None):
            before = heap.sample()["heap_in_use_bytes"]
            ret = real_get(ctx, outputs, extend)
            gained = heap.sample()["heap_in_use_bytes"] - before
            with lab.timed("heap_gained", nbytes=max(gained, 0)):
                pass
            return ret

        lab.rt.outputs_get = outputs_get
        variant(lab)

    result = rknnlab.run(measured, model=checks.LAB4_MODEL, iterations=30, warmup=2)
    calls = result.calls
    gained = calls.loc[(calls["function"] == "heap_gained") & (calls["stage"] == "measure"), "bytes"]
    return (float(gained.median()) if len(gained) else 0.0) < 64


def reuse_by_pointer_equality(variant) -> bool:
    """The seed's idea, done honestly: the same address on the later gets = reuse (the first
    gets after warm-up may still alternate between two blocks while the heap settles)."""
    def measured(lab):
        real_get = lab.rt.outputs_get

        def outputs_get(ctx, outputs, extend=None):
            ret = real_get(ctx, outputs, extend)
            print("buf", lab.recorder.stage, outputs[0].buf)
            return ret

        lab.rt.outputs_get = outputs_get
        variant(lab)

    result = rknnlab.run(measured, model=checks.LAB4_MODEL, iterations=10, warmup=2, sample_hz=0)
    lines = [line for line in result["measured"].stdout.splitlines() if line.startswith("buf measure")]
    return len(set(lines[len(lines) // 2:])) <= 1


_TRUTH = {case.__name__: truth for case, truth, _ in checks.REUSE_CASES}


def test_ex2_reference_passes() -> None:
    result = checks.check_reuse_detector(reuse_reference)
    assert result.passed, result
    assert len(result.details) == len(checks.REUSE_CASES)


def test_ex2_stub_not_done() -> None:
    result = checks.check_reuse_detector(_stub)
    assert result.status == "not done"


def test_ex2_none_answer_not_done() -> None:
    result = checks.check_reuse_detector(lambda variant: None)
    assert result.status == "not done" and "returned None" in result.message


def test_ex2_pointer_equality_is_caught() -> None:
    result = checks.check_reuse_detector(reuse_by_pointer_equality)
    assert result.status == "failed", result
    assert "reuse_case_1" in result.message and "address repeats" in result.message
    assert "heap" in result.hint


def test_ex2_wrong_threshold_gets_its_hint() -> None:
    def too_strict(variant) -> bool:
        return False if variant is checks.reuse_case_2 else _TRUTH[variant.__name__]
    result = checks.check_reuse_detector(too_strict)
    assert result.status == "failed"
    assert "1 of the 4 answers are wrong" in result.message and "threshold" in result.hint


def test_ex2_non_bool_answer() -> None:
    result = checks.check_reuse_detector(lambda variant: "yes")
    assert result.status == "failed" and "not True or False" in result.message


# =========================================================================== exercise 3
@pytest.fixture(scope="module")
def mystery_result():
    import os as _os
    old = _os.environ.get("RKNNLAB_BACKEND")
    _os.environ["RKNNLAB_BACKEND"] = "sim"
    try:
        return rknnlab.run(list(checks.MYSTERY.values()), model=checks.LAB4_MODEL, iterations=200, warmup=5)
    finally:
        if old is None:
            _os.environ.pop("RKNNLAB_BACKEND", None)
        else:
            _os.environ["RKNNLAB_BACKEND"] = old


def _truth3():
    return dict(zip(checks.MYSTERY, checks._MYSTERY_ORDER))


def test_ex3_right_answer_passes(mystery_result) -> None:
    result = checks.check_which_is_which(_truth3(), mystery_result)
    assert result.passed, result
    assert any("from your measurement" in d for d in result.details)


def test_ex3_synonyms_accepted(mystery_result) -> None:
    names = {"leak": "leak_no_release", "release": "alloc_per_call", "prealloc": "Prealloc_Output"}
    result = checks.check_which_is_which({k: names[v] for k, v in _truth3().items()}, mystery_result)
    assert result.passed, result


def test_ex3_wrong_answer_explained(mystery_result) -> None:
    truth = _truth3()
    flat = [k for k, v in truth.items() if v != "leak"]
    swapped = dict(truth)
    swapped[flat[0]], swapped[flat[1]] = truth[flat[1]], truth[flat[0]]
    result = checks.check_which_is_which(swapped, mystery_result)
    assert result.status == "failed"
    assert sum("wrong, it is" in d for d in result.details) == 2
    assert all("kB per 1,000 iterations" in d for d in result.details[1:])
    assert "outputs_release" in result.hint


def test_ex3_stub_and_malformed_answers() -> None:
    assert checks.check_which_is_which({"A": None, "B": None, "C": None}).status == "not done"
    r = checks.check_which_is_which({"A": "leak", "B": "leak", "C": "prealloc"})
    assert r.status == "failed" and "exactly once" in r.message
    r = checks.check_which_is_which({"A": "leak", "B": "zero-copy", "C": "prealloc"})
    assert r.status == "failed" and "not one of" in r.message
    r = checks.check_which_is_which({"A": "leak", "B": "release"})
    assert r.status == "failed" and "keys" in r.message


# =========================================================================== exercise 4
def guard_reference(rt, ctx, index, buf, want_float):
    attr = rt.query(ctx, abi.RKNN_QUERY_OUTPUT_ATTR, abi.rknn_tensor_attr(index=index))
    dtype = np.dtype(np.float32 if want_float else np.int8)
    if buf is None or buf.nbytes != attr.n_elems * dtype.itemsize or buf.dtype != dtype:
        buf = np.empty(attr.n_elems, dtype=dtype)
    return buf


def guard_never_reallocates(rt, ctx, index, buf, want_float):
    attr = rt.query(ctx, abi.RKNN_QUERY_OUTPUT_ATTR, abi.rknn_tensor_attr(index=index))
    if buf is None:
        buf = np.empty(attr.n_elems, dtype=np.float32 if want_float else np.int8)
    return buf


def guard_always_allocates(rt, ctx, index, buf, want_float):
    attr = rt.query(ctx, abi.RKNN_QUERY_OUTPUT_ATTR, abi.rknn_tensor_attr(index=index))
    return np.empty(attr.n_elems, dtype=np.float32 if want_float else np.int8)


def guard_without_query(rt, ctx, index, buf, want_float):
    return buf if buf is not None else np.empty(10, dtype=np.float32)


def guard_wrong_dtype(rt, ctx, index, buf, want_float):
    attr = rt.query(ctx, abi.RKNN_QUERY_OUTPUT_ATTR, abi.rknn_tensor_attr(index=index))
    need = attr.n_elems * (4 if want_float else 1)
    if buf is None or buf.nbytes != need:
        buf = np.empty(need, dtype=np.uint8)
    return buf


def test_ex4_reference_passes() -> None:
    result = checks.check_output_guard(guard_reference)
    assert result.passed, result
    assert len(result.details) == 7


def test_ex4_stub_not_done() -> None:
    assert checks.check_output_guard(_stub).status == "not done"


@pytest.mark.parametrize("guard, expected", [
    (guard_never_reallocates, "kept the 40-byte buffer, but the output now needs 4000 bytes"),
    (guard_always_allocates, "allocated a new buffer although the size"),
    (guard_without_query, "did not call rt.query"),
    (guard_wrong_dtype, "bytes of uint8"),
])
def test_ex4_wrong_guards_fail(guard, expected) -> None:
    result = checks.check_output_guard(guard)
    assert result.status == "failed", result
    assert expected in result.message, result
    assert result.hint


# =========================================================================== exercise 5
def _two_threads(rt, model_path, images, per_thread: bool, lock: bool = False, threads: int = 2):
    ctx0 = rt.init(model_path)
    ctxs = [ctx0] + [rt.dup_context(ctx0) for _ in range(threads - 1)]
    attr = rt.query(ctx0, abi.RKNN_QUERY_OUTPUT_ATTR, abi.rknn_tensor_attr(index=0))
    shared = np.empty(attr.n_elems, dtype=np.float32)
    guard = threading.Lock()
    preds = np.full(len(images), -1)

    def worker(ctx, indices):
        out = np.empty(attr.n_elems, dtype=np.float32) if per_thread else shared
        outs = [abi.rknn_output(index=0, want_float=1, is_prealloc=1, buf=out.ctypes.data, size=out.nbytes)]
        for i in indices:
            rt.inputs_set(ctx, [buffers.input_from_array(0, images[i], fmt=abi.RKNN_TENSOR_NHWC)])
            rt.run(ctx)
            if lock:
                with guard:
                    rt.outputs_get(ctx, outs)
                    preds[i] = int(np.argmax(out))
            else:
                rt.outputs_get(ctx, outs)
                time.sleep(0.001)
                preds[i] = int(np.argmax(out))

    ts = [threading.Thread(target=worker, args=(ctx, range(k, len(images), threads)))
          for k, ctx in enumerate(ctxs)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for ctx in reversed(ctxs):
        rt.destroy(ctx)
    return preds


def test_ex5_reference_passes() -> None:
    result = checks.check_two_threads(lambda rt, path, images: _two_threads(rt, path, images, per_thread=True))
    assert result.passed, result


def test_ex5_stub_not_done() -> None:
    assert checks.check_two_threads(_stub).status == "not done"


def test_ex5_shared_buffer_gives_wrong_predictions() -> None:
    result = checks.check_two_threads(lambda rt, path, images: _two_threads(rt, path, images, per_thread=False))
    assert result.status == "failed"
    assert "same buffer" in result.message and "predictions came out wrong" in result.message
    assert "accuracy" in result.details[0]


def test_ex5_shared_buffer_is_caught_even_when_right() -> None:
    result = checks.check_two_threads(
        lambda rt, path, images: _two_threads(rt, path, images, per_thread=False, lock=True))
    assert result.status == "failed"
    assert "came out right this time" in result.message


def test_ex5_one_thread_is_not_the_fix() -> None:
    result = checks.check_two_threads(
        lambda rt, path, images: _two_threads(rt, path, images, per_thread=True, threads=1))
    assert result.status == "failed" and "one thread" in result.message


def test_ex5_wrong_shape() -> None:
    result = checks.check_two_threads(lambda rt, path, images: [1, 2, 3])
    assert result.status == "failed" and "one prediction per image" in result.message


def test_summary_lists_the_checks() -> None:
    checks.check_output_guard(guard_reference)
    text = repr(checks.summary())
    assert "checks passed" in text and "PASSED      Exercise 4" in text
    assert "<table>" in checks.summary()._repr_html_()


# =========================================================================== the notebook
def _check_cells(nb):
    return [c for c in nb.cells if c.cell_type == "code" and c.source.lstrip().startswith("checks.check_")]


def _defined_names(source: str) -> set:
    names = set()
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def test_lab_notebook_structure() -> None:
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.read(LAB, as_version=4)
    nbformat.validate(nb)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), "commit without outputs"
    assert len(_check_cells(nb)) >= 5
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    for heading in ("**Questions**", "**Objectives**", "## Key points", "## Further reading",
                    "Errata — seed 000"):
        assert heading in text
    code = [c for c in nb.cells if c.cell_type == "code"]
    for k, cell in enumerate(code):
        if "solution" in (cell.metadata.get("tags") or []):
            # the cell before is the stub: the solution defines the same names, so it overrides it
            assert _defined_names(cell.source) >= _defined_names(code[k - 1].source) > set(), cell.source[:80]


def _execute(nb, path: Path):
    nbclient = pytest.importorskip("nbclient")
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": str(path.parent)}})
    started = time.monotonic()
    client.execute()
    return time.monotonic() - started


def _check_outputs(nb):
    out = []
    for cell in _check_cells(nb):
        texts = [o["data"]["text/plain"] for o in cell.get("outputs", []) if o.get("output_type") == "execute_result"]
        errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
        assert not errors, f"{cell.source}: {errors[0].get('ename')}: {errors[0].get('evalue')}"
        assert len(texts) == 1, f"{cell.source}: no check result shown"
        assert "text/html" in [k for o in cell.outputs if o.get("output_type") == "execute_result" for k in o["data"]]
        out.append((cell.source.strip(), texts[0]))
    return out


@pytest.fixture
def _kernel_env(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("ipykernel")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(ROOT / "lib")] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    monkeypatch.setenv("PATH", os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))


@pytest.mark.timeout(300)
def test_lab_instructor_edition_passes_every_check(_kernel_env) -> None:
    nbformat = pytest.importorskip("nbformat")
    from rknnlab.book.editions import apply_edition
    nb = apply_edition(nbformat.read(LAB, as_version=4), "instructor")
    elapsed = _execute(nb, LAB)
    results = _check_outputs(nb)
    for source, text in results:
        assert text.startswith("PASSED"), f"{source}\n{text}"
    assert elapsed < 60, f"the instructor edition took {elapsed:.0f} s (budget 60 s)"


@pytest.mark.timeout(300)
def test_lab_student_edition_runs_and_reports_not_done(_kernel_env) -> None:
    nbformat = pytest.importorskip("nbformat")
    from rknnlab.book.editions import apply_edition
    nb = apply_edition(nbformat.read(LAB, as_version=4), "student")
    assert not any("solution" in (c.metadata.get("tags") or []) for c in nb.cells)
    _execute(nb, LAB)   # raises CellExecutionError if any cell fails
    results = _check_outputs(nb)
    assert len(results) >= 5
    for source, text in results:
        assert text.startswith("NOT PASSED"), f"{source}\n{text}"
        assert "Hint:" in text and "Traceback" not in text, text
