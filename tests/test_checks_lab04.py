"""Lab 4's checks, tried as a sceptical instructor would, on the simulator.

Every exercise: the reference solution and at least one legitimately different solution
pass; at least three planted wrong answers (the shortcuts a student finds) fail, each with
a message that names the problem and never the answer; the untouched stub gives "not done".

Exercises 4 and 5 ★ call the student's function once per variant, and a real solution runs
each variant with rknnlab.run.  To keep this file fast, the decision rules planted here
(right and wrong) decide from measurements taken once per variant by ``measured``, a
module fixture that runs every variant the checks hand out with the same recording
wrapper a student would write; the notebook's own solutions run end to end in
tests/test_checks.py.
"""
from __future__ import annotations

import ctypes
import os
import threading
import time

import numpy as np
import pytest

pytest.importorskip("pandas")
pytest.importorskip("onnxruntime")

import rknnlab  # noqa: E402
from rknnlab import probe  # noqa: E402
from rknnlab.checks import _lab04_cases as cases  # noqa: E402
from rknnlab.checks import lab04 as checks  # noqa: E402
from rknnlab.experiment import variants  # noqa: E402
from rknnlab.experiment.variants import frame_input, query_io  # noqa: E402
from rknnlab.rknn import abi, buffers  # noqa: E402


@pytest.fixture(autouse=True)
def _simulator(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RKNNLAB_BACKEND", "sim")


def _stub(*args, **kwargs):
    raise NotImplementedError("your code here")


def _failed(result, *expected: str) -> None:
    assert result.status == "failed", result
    text = repr(result)
    for e in expected:
        assert e in text, f"{e!r} not in:\n{text}"
    assert result.hint, result
    assert "Traceback" not in text and "seed 0" not in text.lower()


@pytest.mark.parametrize("check", [checks.check_output_guard, checks.check_prealloc_variant,
                                   checks.check_which_is_which, checks.check_reuse_detector,
                                   checks.check_two_threads])
def test_checks_never_raise_on_nothing(check) -> None:
    result = check(None)
    assert isinstance(result, checks.CheckResult)
    assert result.status == "not done" and not result.passed and result.hint


# =========================================================================== exercise 2 (the guard)
def _predictions(rule):
    rt = rknnlab.open_runtime("sim")
    ctx = rt.init(str(rknnlab.models.model_path(checks.SIZES_MODEL, "rk3588")))
    _, attrs = query_io(rt, ctx)
    rt.destroy(ctx)
    rt.close()
    return {(a.index, wf): rule(a, wf) for a in attrs for wf in (1, 0)}


RIGHT_SIZES = None


def right_sizes():
    global RIGHT_SIZES
    if RIGHT_SIZES is None:
        RIGHT_SIZES = _predictions(lambda a, wf: a.n_elems * 4 if wf else a.size)
    return RIGHT_SIZES


def guard_reference(rt, ctx, index, buf, want_float):
    attr = rt.query(ctx, abi.RKNN_QUERY_OUTPUT_ATTR, abi.rknn_tensor_attr(index=index))
    need = attr.n_elems * 4 if want_float else attr.size
    if buf is None or buf.nbytes < need:
        buf = np.empty(need // 4 if want_float else need, dtype=np.float32 if want_float else np.int8)
    return buf


def guard_alternative(rt, ctx, index, buf, want_float):
    """Legitimately different: zeros, counts elements of the buffer's own dtype, returns a view when it keeps."""
    attr = rt.query(ctx, abi.RKNN_QUERY_OUTPUT_ATTR, abi.rknn_tensor_attr(index=index))
    need = attr.n_elems * 4 if want_float else attr.size
    if buf is not None and buf.size * buf.itemsize >= need:
        return buf.view()
    return np.zeros(need // 4 if want_float else need, np.float32 if want_float else np.int8)


def guard_of_chapter_4(rt, ctx, index, buf, want_float):
    """Chapter 4 §4's Python guard, adapted to the lab's signature: uint8 storage of `need`
    bytes, kept whenever it is large enough (the reviewers' regression case)."""
    attr = rt.query(ctx, abi.RKNN_QUERY_OUTPUT_ATTR, abi.rknn_tensor_attr(index=index))
    need = attr.n_elems * 4 if want_float else attr.size                # the size rule
    if buf is None or buf.nbytes < need:                                # too small: reallocate
        buf = np.empty(need, dtype=np.uint8)
    return buf


def guard_requires_dtype(rt, ctx, index, buf, want_float):
    """Reallocates a large-enough buffer because its numpy dtype differs: an allocation the
    program does not need (the runtime sees only a pointer and a size)."""
    attr = rt.query(ctx, abi.RKNN_QUERY_OUTPUT_ATTR, abi.rknn_tensor_attr(index=index))
    dtype = np.dtype(np.float32 if want_float else np.int8)
    need = attr.n_elems * 4 if want_float else attr.size
    if buf is None or buf.dtype != dtype or buf.nbytes < need:
        buf = np.empty(need // dtype.itemsize, dtype=dtype)
    return buf


def guard_ignores_index(rt, ctx, index, buf, want_float):
    return guard_reference(rt, ctx, 0, buf, want_float)


def guard_never_reallocates(rt, ctx, index, buf, want_float):
    return buf if buf is not None else guard_reference(rt, ctx, index, None, want_float)


def guard_always_allocates(rt, ctx, index, buf, want_float):
    return guard_reference(rt, ctx, index, None, want_float)


def guard_exact_size(rt, ctx, index, buf, want_float):
    attr = rt.query(ctx, abi.RKNN_QUERY_OUTPUT_ATTR, abi.rknn_tensor_attr(index=index))
    need = attr.n_elems * (4 if want_float else 1)
    if buf is None or buf.nbytes != need:
        buf = np.empty(attr.n_elems, np.float32 if want_float else np.int8)
    return buf


def guard_too_small_elements(rt, ctx, index, buf, want_float):
    """Counts elements, not bytes: a float32 output gets n_elems bytes."""
    attr = rt.query(ctx, abi.RKNN_QUERY_OUTPUT_ATTR, abi.rknn_tensor_attr(index=index))
    if buf is None or buf.nbytes < attr.n_elems:
        buf = np.empty(attr.n_elems, np.uint8)
    return buf


def test_ex1_reference_and_alternative_pass() -> None:
    for guard in (guard_reference, guard_alternative):
        result = checks.check_output_guard(guard, right_sizes())
        assert result.passed, result
    assert any("output 0 wf=1" in d for d in result.details)


def test_ex1_chapter_4_guard_passes() -> None:
    """The runtime sees a pointer and a size: the chapter's uint8 guard, which keeps any
    buffer large enough whatever its numpy dtype, is right (review B1 / A3)."""
    result = checks.check_output_guard(guard_of_chapter_4, right_sizes())
    assert result.passed, result
    assert any("mobilenet_v2 output 0, want_float=0: kept the buffer" in d for d in result.details), result.details


def test_ex1_stubs_not_done() -> None:
    assert checks.check_output_guard(_stub, right_sizes()).status == "not done"
    blank = {k: None for k in right_sizes()}
    assert checks.check_output_guard(guard_reference, blank).status == "not done"


@pytest.mark.parametrize("rule, expected", [
    (lambda a, wf: a.n_elems, "too small"),                   # forgot float32's 4 bytes
    (lambda a, wf: a.n_elems * 4, "too large"),               # float32 size for want_float = 0 as well
    (lambda a, wf: a.size_with_stride * 4 if wf else a.size_with_stride + 1, "too large"),
])
def test_ex1_wrong_predictions_fail_without_the_answer(rule, expected) -> None:
    predicted = _predictions(rule)
    result = checks.check_output_guard(guard_reference, predicted)
    _failed(result, expected, "predictions differ")
    right = right_sizes()
    for (index, wf), value in right.items():
        lines = [d for d in result.details if d.startswith(f"output {index}, want_float = {wf}:")]
        assert len(lines) == (predicted[(index, wf)] != value)
        assert not any(f"{value:,}" in d for d in lines)     # the right size is never shown


@pytest.mark.parametrize("guard, expected", [
    (guard_ignores_index, "allocated a new buffer although the one given is large enough for output 1"),
    (guard_never_reallocates, "kept the buffer, but it is too small"),
    (guard_always_allocates, "allocated a new buffer although"),
    (guard_exact_size, "allocated a new buffer although the one given is large enough"),
    (guard_requires_dtype, "allocated a new buffer although the one given is large enough for output 0"),
    (guard_too_small_elements, "too small"),
])
def test_ex1_wrong_guards_fail(guard, expected) -> None:
    _failed(checks.check_output_guard(guard, right_sizes()), expected)


# =========================================================================== exercise 3 (the prealloc variant)
def _wf(index):
    """The exercise's want_float per output: output 0 as float32, the others as int8."""
    return 1 if index == 0 else 0


def _mixed(attrs):
    """Buffers sized by the size rule for each output's want_float, and their rknn_outputs."""
    keep = [np.empty(a.n_elems, np.float32) if _wf(a.index) else np.empty(a.size, np.int8) for a in attrs]
    outs = [abi.rknn_output(index=a.index, want_float=_wf(a.index), is_prealloc=1, buf=b.ctypes.data,
                            size=b.nbytes) for a, b in zip(attrs, keep)]
    return keep, outs


def prealloc_reference(lab):
    rt = lab.rt
    ctx = rt.init(lab.model_path)
    _, out_attrs = query_io(rt, ctx)
    keep, outs = _mixed(out_attrs)
    for i in lab.loop():
        rt.inputs_set(ctx, frame_input(lab.input(i)))
        rt.run(ctx)
        rt.outputs_get(ctx, outs)
        rt.outputs_release(ctx, outs)
    rt.destroy(ctx)


def prealloc_ctypes_double_buffered(lab):
    """Legitimately different: ctypes arrays larger than needed, two sets used in turn (the
    address changes every iteration; nothing is allocated)."""
    rt = lab.rt
    ctx = rt.init(lab.model_path)
    n = rt.query(ctx, abi.RKNN_QUERY_IN_OUT_NUM).n_output
    attrs = [rt.query(ctx, abi.RKNN_QUERY_OUTPUT_ATTR, abi.rknn_tensor_attr(index=k)) for k in range(n)]
    sets = [[(ctypes.c_uint8 * ((a.size if k else a.n_elems * 4) + 64))() for k, a in enumerate(attrs)]
            for _ in range(2)]
    for i in lab.loop():
        bufs = sets[i % 2]
        outs = [abi.rknn_output(index=a.index, want_float=_wf(a.index), is_prealloc=1, buf=ctypes.addressof(b),
                                size=ctypes.sizeof(b)) for a, b in zip(attrs, bufs)]
        rt.inputs_set(ctx, frame_input(lab.input(i)))
        rt.run(ctx)
        rt.outputs_get(ctx, outs)
        rt.outputs_release(ctx, outs)
    rt.destroy(ctx)


def zipformer_style_no_release(lab):
    """is_prealloc = 1 into buffers allocated once, never released: Rockchip's model-zoo
    zipformer demo does this.  Correct as far as any document says: a note, not a failure."""
    rt = lab.rt
    ctx = rt.init(lab.model_path)
    _, out_attrs = query_io(rt, ctx)
    keep, outs = _mixed(out_attrs)
    for i in lab.loop():
        rt.inputs_set(ctx, frame_input(lab.input(i)))
        rt.run(ctx)
        rt.outputs_get(ctx, outs)
    rt.destroy(ctx)


def chapter_4_prealloc(lab):
    """Chapter 4 §3's variant copied unchanged: one output, want_float = 1 (the faded example):
    right for mobilenet_v2, wrong for yolov5n's three outputs."""
    rt = lab.rt
    ctx = rt.init(lab.model_path)
    _, attrs = query_io(rt, ctx)
    scores = np.empty(attrs[0].n_elems, dtype=np.float32)
    outs = [abi.rknn_output(index=0, want_float=1, is_prealloc=1, buf=scores.ctypes.data, size=scores.nbytes)]
    for i in lab.loop():
        rt.inputs_set(ctx, frame_input(lab.input(i)))
        rt.run(ctx)
        rt.outputs_get(ctx, outs)
        rt.outputs_release(ctx, outs)
    rt.destroy(ctx)


def float_everywhere(lab):
    """Every output as float32: the chapter's choice, not the exercise's."""
    rt = lab.rt
    ctx = rt.init(lab.model_path)
    _, out_attrs = query_io(rt, ctx)
    keep = [np.empty(a.n_elems, dtype=np.float32) for a in out_attrs]
    outs = [abi.rknn_output(index=a.index, want_float=1, is_prealloc=1, buf=b.ctypes.data, size=b.nbytes)
            for a, b in zip(out_attrs, keep)]
    for i in lab.loop():
        rt.inputs_set(ctx, frame_input(lab.input(i)))
        rt.run(ctx)
        rt.outputs_get(ctx, outs)
        rt.outputs_release(ctx, outs)
    rt.destroy(ctx)


def new_buffer_every_iteration(lab):
    rt = lab.rt
    ctx = rt.init(lab.model_path)
    _, out_attrs = query_io(rt, ctx)
    keep = None
    for i in lab.loop():
        keep, outs = _mixed(out_attrs)
        rt.inputs_set(ctx, frame_input(lab.input(i)))
        rt.run(ctx)
        rt.outputs_get(ctx, outs)
        rt.outputs_release(ctx, outs)
    rt.destroy(ctx)


def inputs_set_once(lab):
    rt = lab.rt
    ctx = rt.init(lab.model_path)
    _, out_attrs = query_io(rt, ctx)
    keep, outs = _mixed(out_attrs)
    rt.inputs_set(ctx, frame_input(lab.input(0)))
    for i in lab.loop():
        rt.run(ctx)
        rt.outputs_get(ctx, outs)
        rt.outputs_release(ctx, outs)
    rt.destroy(ctx)


def dangling_temporary(lab):
    rt = lab.rt
    ctx = rt.init(lab.model_path)
    _, out_attrs = query_io(rt, ctx)
    outs = [abi.rknn_output(index=a.index, want_float=_wf(a.index), is_prealloc=1,
                            buf=np.empty(a.n_elems, dtype=np.float32).ctypes.data, size=a.n_elems * 4)
            for a in out_attrs]
    for i in lab.loop():
        rt.inputs_set(ctx, frame_input(lab.input(i)))
        rt.run(ctx)
        rt.outputs_get(ctx, outs)
        rt.outputs_release(ctx, outs)
    rt.destroy(ctx)


def the_librarys_own(lab):
    variants.prealloc_output(lab)


def behaves_while_recorded_briefly(lab):
    """Behaves for the first iterations of a recorded run only (it reads the environment)."""
    rt = lab.rt
    ctx = rt.init(lab.model_path)
    _, out_attrs = query_io(rt, ctx)
    keep, outs = _mixed(out_attrs)
    recorded = bool(os.environ.get("RKNNLAB_CHECKS_RECORD"))
    for i in lab.loop():
        if not (recorded and i < 6):
            keep, outs = _mixed(out_attrs)
        rt.inputs_set(ctx, frame_input(lab.input(i)))
        rt.run(ctx)
        rt.outputs_get(ctx, outs)
        rt.outputs_release(ctx, outs)
    rt.destroy(ctx)


def runtime_allocates_no_release(lab):
    """is_prealloc = 0 and no release: the leak; it must fail, whatever the pairing note says."""
    rt = lab.rt
    ctx = rt.init(lab.model_path)
    _, out_attrs = query_io(rt, ctx)
    for i in lab.loop():
        rt.inputs_set(ctx, frame_input(lab.input(i)))
        rt.run(ctx)
        outs = [abi.rknn_output(index=a.index, want_float=_wf(a.index), is_prealloc=0) for a in out_attrs]
        rt.outputs_get(ctx, outs)
    rt.destroy(ctx)


def runtime_allocates(lab):
    rt = lab.rt
    ctx = rt.init(lab.model_path)
    _, out_attrs = query_io(rt, ctx)
    for i in lab.loop():
        rt.inputs_set(ctx, frame_input(lab.input(i)))
        rt.run(ctx)
        outs = [abi.rknn_output(index=a.index, want_float=_wf(a.index), is_prealloc=0) for a in out_attrs]
        rt.outputs_get(ctx, outs)
        rt.outputs_release(ctx, outs)
    rt.destroy(ctx)


def first_output_only(lab):
    rt = lab.rt
    ctx = rt.init(lab.model_path)
    _, out_attrs = query_io(rt, ctx)
    keep, outs = _mixed(out_attrs[:1])
    for i in lab.loop():
        rt.inputs_set(ctx, frame_input(lab.input(i)))
        rt.run(ctx)
        rt.outputs_get(ctx, outs)
        rt.outputs_release(ctx, outs)
    rt.destroy(ctx)


def keeps_history(lab):
    rt = lab.rt
    ctx = rt.init(lab.model_path)
    _, out_attrs = query_io(rt, ctx)
    keep, outs = _mixed(out_attrs)
    history = []
    for i in lab.loop():
        rt.inputs_set(ctx, frame_input(lab.input(i)))
        rt.run(ctx)
        rt.outputs_get(ctx, outs)
        rt.outputs_release(ctx, outs)
        history.append(keep[0][:1000].astype(np.float32))
    rt.destroy(ctx)


def writes_to_a_bad_address(lab):
    rt = lab.rt
    ctx = rt.init(lab.model_path)
    _, out_attrs = query_io(rt, ctx)
    outs = [abi.rknn_output(index=a.index, want_float=_wf(a.index), is_prealloc=1, buf=16, size=a.n_elems * 4)
            for a in out_attrs]
    for i in lab.loop():
        rt.inputs_set(ctx, frame_input(lab.input(i)))
        rt.run(ctx)
        rt.outputs_get(ctx, outs)
    rt.destroy(ctx)


def test_ex2_reference_passes() -> None:
    result = checks.check_prealloc_variant(prealloc_reference)
    assert result.passed, result
    assert any("heap in use grew by" in d and "expected below" in d for d in result.details)
    assert any("yolov5n" in d for d in result.details)
    assert not any(d.startswith("Note:") for d in result.details)


def test_ex2_alternative_passes() -> None:
    result = checks.check_prealloc_variant(prealloc_ctypes_double_buffered, iterations=40)
    assert result.passed, result


def test_ex2_zipformer_style_loop_passes_with_a_note() -> None:
    """Rockchip's code disagrees on releasing after an is_prealloc = 1 get (DECISIONS 4):
    the check does not fail the model zoo's pattern; it says the course's convention."""
    result = checks.check_prealloc_variant(zipformer_style_no_release, iterations=40)
    assert result.passed, result
    notes = [d for d in result.details if d.startswith("Note:")]
    assert notes and "zipformer" in notes[0] and "had no rknn_outputs_release" in notes[0], result.details
    assert "note on the release" in result.message


def test_ex2_stub_not_done() -> None:
    result = checks.check_prealloc_variant(_stub)
    assert result.status == "not done" and "NotImplementedError" in result.message


@pytest.mark.parametrize("variant, expected", [
    (chapter_4_prealloc, "has 3 output(s)"),
    (float_everywhere, "want_float = 1; the exercise asks for want_float = 0"),
    (new_buffer_every_iteration, "had just been allocated"),
    (behaves_while_recorded_briefly, "had just been allocated"),
    (inputs_set_once, "the inputs did not change"),
    (the_librarys_own, "rknnlab's own rknnlab.experiment.variants"),
    (runtime_allocates_no_release, "is_prealloc = 0"),
    (runtime_allocates, "is_prealloc = 0"),
    (first_output_only, "has 3 output(s)"),
    (writes_to_a_bad_address, "SIGSEGV"),
])
def test_ex2_wrong_variants_fail(variant, expected) -> None:
    _failed(checks.check_prealloc_variant(variant, iterations=40), expected)


def test_ex2_a_dangling_temporary_fails() -> None:
    """buf points into an array freed before the loop: the runtime writes into freed heap
    memory, and what that corrupts decides how the run ends (it depends on the heap's
    layout, which the load on the machine changes): a crash, where the check names the
    dangling buffer, or an error raised at a runtime call further on (a corrupted heap
    returned NULL: "raised MemoryError ... at rt.run(ctx)").  Either way the check
    fails and says what happened."""
    result = checks.check_prealloc_variant(dangling_temporary, iterations=40)
    _failed(result)
    text = repr(result)
    crashed = "keep alive for the whole loop" in text
    raised_at_a_call = ("dangling_temporary(lab) on " in text and " raised " in text
                        and "(in dangling_temporary, line " in text
                        and any(f": `rt.{call}(" in text
                                for call in ("inputs_set", "run", "outputs_get", "outputs_release")))
    assert crashed or raised_at_a_call, text


def test_ex2_keeping_copies_fails_on_rss() -> None:
    _failed(checks.check_prealloc_variant(keeps_history, iterations=60), "keeps about", "expected below")


# =========================================================================== exercises 4 and 5 ★
def _measuring(variant):
    """A variant running ``variant`` with the measurements a student's solution takes: the
    heap gained inside every rknn_outputs_get, and, for a caller's buffer, whether it still
    holds the last get's bytes when the next get starts (MALLOC_PERTURB_ set).  Summed in
    the variant's process and sent once, at the end: a row per get would itself grow RSS."""
    def measured(lab):
        heap = probe.Heap()
        real_get = lab.rt.outputs_get
        last = {}
        seen = {"gets": 0, "allocating": 0, "fresh": 0, "prealloc": 0, "addresses": set(), "heap": []}

        def outputs_get(ctx, outputs, extend=None):
            fresh = 0
            for o in outputs:
                if o.is_prealloc and o.buf in last and ctypes.string_at(o.buf, o.size) != last[o.buf]:
                    fresh += 1
            before = heap.sample()["heap_in_use_bytes"]
            ret = real_get(ctx, outputs, extend)
            gained = heap.sample()["heap_in_use_bytes"] - before
            for o in outputs:
                if o.is_prealloc:
                    last[o.buf] = ctypes.string_at(o.buf, o.size)
            if lab.recorder.stage == "measure":
                seen["heap"][1:] = [heap.sample()["heap_in_use_bytes"]]
                if seen["gets"] == 0:
                    seen["heap"] = seen["heap"] * 2
                seen["gets"] += 1
                seen["allocating"] += gained >= 64
                seen["fresh"] += fresh
                seen["prealloc"] += bool(outputs[0].is_prealloc)
                if len(seen["addresses"]) < 10:
                    seen["addresses"].add(outputs[0].buf)
            return ret

        lab.rt.outputs_get = outputs_get
        variant(lab)
        for key in ("gets", "allocating", "fresh", "prealloc"):
            with lab.timed(key, nbytes=seen[key]):
                pass
        with lab.timed("addresses", nbytes=len(seen["addresses"])):
            pass
        first, last = seen["heap"] or (0, 0)
        with lab.timed("kept", nbytes=max(last - first, 0) // max(seen["gets"] - 1, 1)):
            pass

    return measured


def _measure(variant) -> dict:
    from rknnlab import watch
    with watch.malloc_perturb():   # MALLOC_PERTURB_=165 with glibc's tcache off, as the checks run
        res = rknnlab.run(_measuring(variant), model=checks.LAB4_MODEL, iterations=40, warmup=3)
    calls = res.calls
    row = {f: int(calls.loc[calls["function"] == f, "bytes"].iloc[0])
           for f in ("gets", "allocating", "fresh", "prealloc", "addresses", "kept")}
    gets = max(row["gets"], 1)
    m = calls[calls["stage"] == "measure"]
    return {
        "allocating": row["allocating"] / gets,    # share of gets that allocated
        "fresh": row["fresh"] / gets,              # caller's buffers found freshly allocated, per get
        "gets": row["gets"],
        "kept": row["kept"],                       # heap in use, last get minus first, per get
        "releases": int((m["function"] == "outputs_release").sum()),
        "addresses": row["addresses"],
        "is_prealloc": row["gets"] > 0 and row["prealloc"] == row["gets"],
    }


@pytest.fixture(scope="module")
def measured():
    os.environ["RKNNLAB_BACKEND"] = "sim"
    every = {id(f): _measure(f) for f in cases.which_cases() + cases.reuse_cases() if f is not cases.case_x}
    for kind in cases.CASE_X_KINDS:     # the kind the check draws for case_x reaches its process
        os.environ[cases.CASE_X_ENV] = kind
        every[(id(cases.case_x), kind)] = _measure(cases.case_x)
    del os.environ[cases.CASE_X_ENV]
    return lambda variant: every.get(id(variant)) or every[(id(variant), os.environ[cases.CASE_X_ENV])]


def _answers(rule, measured):
    return lambda variant: rule(measured(variant))


# exercise 4 rules (which is which)
def classify_reference(m):
    if m["allocating"] < 0.5:
        return "fresh" if m["fresh"] > 0.5 else "prealloc"
    return "leak" if m["kept"] > 1000 else "release"


def classify_alternative(m):
    """Legitimately different: counts allocating gets and new buffers, and compares the heap
    kept with half an output."""
    allocates = m["allocating"] * m["gets"] > 10
    if allocates:
        return "leak" if m["kept"] > 0.5 * 4000 else "release"
    return "fresh" if m["fresh"] * m["gets"] > 10 else "prealloc"


def classify_by_heap_inside_the_get_only(m):
    """The first measurement alone: a fresh caller's buffer passes for prealloc."""
    if m["allocating"] < 0.5:
        return "prealloc"
    return "leak" if m["kept"] > 1000 else "release"


def classify_by_flat_memory(m):
    """Flat memory taken for reuse."""
    return "leak" if m["kept"] > 1000 else "prealloc"


def classify_by_release_calls(m):
    return "leak" if m["kept"] > 1000 else "release" if m["releases"] else "prealloc"


def test_ex4_which_reference_and_alternative_pass(measured) -> None:
    for rule in (classify_reference, classify_alternative):
        result = checks.check_which_is_which(_answers(rule, measured))
        assert result.passed, result
        assert len(result.details) == 5


def test_ex4_which_stub_not_done() -> None:
    assert checks.check_which_is_which(_stub).status == "not done"
    assert checks.check_which_is_which(lambda v: None).status == "not done"


@pytest.mark.parametrize("default", ["leak", "release", "prealloc", "fresh"])
def test_ex4_which_lookup_of_the_letters_fails(default, measured) -> None:
    """The four letters' answers learnt by heart (here: right ones, as a ranking of their
    slopes would give) say nothing about the fifth variant, whose kind each check draws:
    whatever the lookup answers for it is wrong in most checks."""
    known = {f.__name__: classify_reference(measured(f)) for f in checks.MYSTERY.values()}
    outcomes = [checks.check_which_is_which(lambda v: known.get(v.__name__, default)).passed for _ in range(12)]
    assert False in outcomes, outcomes     # all 12 passing: chance below (2/5)^12


@pytest.mark.parametrize("rule", [classify_by_flat_memory, classify_by_release_calls,
                                  classify_by_heap_inside_the_get_only])
def test_ex4_which_shortcuts_fail_without_the_answer(rule, measured) -> None:
    result = checks.check_which_is_which(_answers(rule, measured))
    _failed(result, "is wrong", "stops at the first wrong one")
    assert not result.details
    # a letter the student can run is named (with the word they gave); the fifth stays anonymous
    import re
    named = re.search(r"Your answer for ([A-D]) \(checks.MYSTERY\['\1'\]\) is wrong: you said '(\w+)'",
                      result.message)
    if named:
        letter, word = named.groups()
        assert word == rule(measured(checks.MYSTERY[letter])) != cases.which_truth(checks.MYSTERY[letter])
    else:
        assert "the fifth variant" in result.message and "case_x" not in result.message
    for kind in ("leak", "release", "prealloc", "fresh"):  # the right word is never said
        assert f"would be {kind}" not in result.message and f"is a {kind}" not in result.message


def test_ex4_which_bad_words() -> None:
    result = checks.check_which_is_which(lambda v: "zero-copy")
    assert result.status == "failed" and "not one of" in result.message


# exercise 5 ★ rules (reuse)
def reuse_reference(m):
    return m["allocating"] < 0.5 and m["fresh"] < 0.5


def reuse_alternative(m):
    """Legitimately different: allocations per iteration, counted from both measurements."""
    per_iteration = m["allocating"] + m["fresh"]
    return per_iteration < 0.25


def reuse_by_heap_in_get_only(m):
    return m["allocating"] < 0.5


def reuse_by_flag(m):
    return m["is_prealloc"] or m["gets"] == 0


def reuse_by_release_calls(m):
    return m["releases"] == 0 and m["kept"] < 1000


def reuse_by_address(m):
    return m["addresses"] <= 1


def reuse_by_flat_memory(m):
    return m["kept"] < 1000


@pytest.mark.parametrize("rule", [reuse_reference, reuse_alternative])
def test_ex5_reuse_right_rules_pass(rule, measured) -> None:
    result = checks.check_reuse_detector(_answers(rule, measured))
    assert result.passed, result
    assert len(result.details) == len(cases.reuse_cases())


def test_ex5_reuse_stub_not_done() -> None:
    assert checks.check_reuse_detector(_stub).status == "not done"
    assert checks.check_reuse_detector(lambda v: None).status == "not done"


@pytest.mark.parametrize("rule", [reuse_by_heap_in_get_only, reuse_by_flag, reuse_by_release_calls,
                                  reuse_by_address, reuse_by_flat_memory])
def test_ex5_reuse_shortcuts_fail_without_the_answer(rule, measured) -> None:
    result = checks.check_reuse_detector(_answers(rule, measured))
    _failed(result, "wrong. The trap(s) your function fell into")
    wrong = sum(rule(measured(c)) != cases.reuse_truth(c) for c in cases.reuse_cases())
    assert len(result.details) == wrong            # one trap named per wrong answer ...
    assert f"{wrong} of your 6 answers {'is' if wrong == 1 else 'are'} wrong" in result.message
    for detail in result.details:                  # ... by what the variant does, never by its name
        assert detail.startswith("a variant that ") and "case_" not in detail


def test_ex5_reuse_heap_inside_the_get_alone_names_the_fresh_buffer_trap(measured) -> None:
    """The first of chapter 4 §3's two measurements alone misses a caller's fresh buffer:
    the message names that trap (review item 15)."""
    result = checks.check_reuse_detector(_answers(reuse_by_heap_in_get_only, measured))
    assert result.details == ("a variant that sets is_prealloc = 1, but into a buffer allocated anew every "
                              "iteration: you said reuse",), result


def test_ex5_reuse_chapter_4_complete_method_passes() -> None:
    """Chapter 4 §3 teaches two measurements (the heap inside each get, and the caller's
    buffer's bytes under MALLOC_PERTURB_) through rknnlab.watch; used as the chapter does,
    end to end, they pass the exercise (review B2)."""
    from rknnlab import watch

    def reuses_output_memory(variant):
        m = watch.measure(variant, iterations=30)
        return m["allocating_gets"] + m["new_buffers"] < 0.5 * max(m["gets"], 1)

    result = checks.check_reuse_detector(reuses_output_memory)
    assert result.passed, result


def test_ex5_reuse_lookups_fail() -> None:
    """Answers looked up instead of measured: the old truth table is gone, and the cases'
    names (neutral, in a random order) say nothing."""
    result = checks.check_reuse_detector(lambda v: dict((c.__name__, t) for c, t, _ in checks.REUSE_CASES)[v.__name__])
    assert result.status == "failed" and "AttributeError" in result.message
    by_name = lambda v: "prealloc" in v.__name__ or "zero" in v.__name__ or "reuse" in (v.__doc__ or "")
    _failed(checks.check_reuse_detector(by_name), "answers are wrong")


def test_ex5_reuse_no_truth_table_in_the_namespace() -> None:
    assert not hasattr(checks, "REUSE_CASES")
    names = [n for n in dir(checks) if not n.startswith("_")]
    assert not [n for n in names if "case" in n.lower() or "truth" in n.lower()]


def test_ex5_reuse_non_bool_answer() -> None:
    result = checks.check_reuse_detector(lambda variant: "yes")
    assert result.status == "failed" and "not True or False" in result.message


# =========================================================================== exercise 1 (threads)
def _two_threads(rt, model_path, images, per_thread=True, lock=False, threads=2, prealloc=True,
                 release=True, sequential=False):
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
            if not prealloc:
                mine = [abi.rknn_output(index=0, want_float=1, is_prealloc=0)]
                rt.outputs_get(ctx, mine)
                preds[i] = int(np.argmax(np.ctypeslib.as_array(
                    (ctypes.c_float * attr.n_elems).from_address(mine[0].buf))))
                if release:
                    rt.outputs_release(ctx, mine)
                continue
            if lock:
                with guard:
                    rt.outputs_get(ctx, outs)
                    preds[i] = int(np.argmax(out))
            else:
                rt.outputs_get(ctx, outs)
                time.sleep(0.001)
                preds[i] = int(np.argmax(out))
            rt.outputs_release(ctx, outs)

    ts = [threading.Thread(target=worker, args=(ctx, range(k, len(images), threads)))
          for k, ctx in enumerate(ctxs)]
    for t in ts:
        t.start()
        if sequential:
            t.join()
    for t in ts:
        t.join()
    for ctx in reversed(ctxs):
        rt.destroy(ctx)
    return preds


def threads_alternative(rt, model_path, images):
    """Legitimately different: a pool of two workers, each with a context and a buffer of its
    own, taking images from a shared queue; the calling thread only collects."""
    import queue
    todo = queue.Queue()
    for i in range(len(images)):
        todo.put(i)
    preds = [None] * len(images)
    ctx0 = rt.init(model_path)
    ctxs = [ctx0, rt.dup_context(ctx0)]

    def worker(ctx):
        attr = rt.query(ctx, abi.RKNN_QUERY_OUTPUT_ATTR, abi.rknn_tensor_attr(index=0))
        mine = (ctypes.c_float * attr.n_elems)()
        outs = [abi.rknn_output(index=0, want_float=1, is_prealloc=1, buf=ctypes.addressof(mine),
                                size=ctypes.sizeof(mine))]
        while True:
            try:
                i = todo.get_nowait()
            except queue.Empty:
                return
            rt.inputs_set(ctx, [buffers.input_from_array(0, images[i], fmt=abi.RKNN_TENSOR_NHWC)])
            rt.run(ctx)
            rt.outputs_get(ctx, outs)
            time.sleep(0.0005)
            preds[i] = int(np.argmax(np.frombuffer(mine, np.float32)))
            rt.outputs_release(ctx, outs)

    ts = [threading.Thread(target=worker, args=(c,)) for c in ctxs]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    rt.destroy(ctxs[1])
    rt.destroy(ctx0)
    return preds


def test_ex3_threads_reference_and_alternative_pass() -> None:
    for solution in (lambda rt, p, im: _two_threads(rt, p, im), threads_alternative):
        result = checks.check_two_threads(solution)
        assert result.passed, result


def test_ex3_threads_stub_not_done() -> None:
    assert checks.check_two_threads(_stub).status == "not done"


@pytest.mark.parametrize("kwargs, expected", [
    (dict(per_thread=False), "same buffer"),
    (dict(per_thread=False, lock=True), "came out right this time"),
    (dict(threads=1), "one thread"),
    (dict(prealloc=False, release=False), "a leak of one output per image"),
    (dict(prealloc=False), "is_prealloc = 0"),
    (dict(sequential=True), "one after the other"),
])
def test_ex3_threads_wrong_fixes_fail(kwargs, expected) -> None:
    _failed(checks.check_two_threads(lambda rt, p, im: _two_threads(rt, p, im, **kwargs)), expected)


def test_ex3_threads_single_thread_predictions_are_not_a_fix() -> None:
    def show_threads_return_reference(rt, model_path, images):
        _two_threads(rt, model_path, images)
        return checks.single_thread_predictions(rt, model_path, images)

    _failed(checks.check_two_threads(show_threads_return_reference), "rknnlab's own")

    def own_single_thread_loop(rt, model_path, images):
        _two_threads(rt, model_path, images)
        return _two_threads(rt, model_path, images, threads=1)

    _failed(checks.check_two_threads(own_single_thread_loop), "each image is classified once")


def test_ex3_threads_sequential_threads_with_a_reused_id_are_not_one_thread() -> None:
    """Thread ids may be reused after a join: two threads one after the other, each with its
    own buffer, are two threads that did not overlap, not one thread."""
    result = checks.check_two_threads(lambda rt, p, im: _two_threads(rt, p, im, sequential=True))
    assert "one after the other" in result.message and "3 thread" not in repr(result)


def test_ex3_threads_wrong_shape() -> None:
    result = checks.check_two_threads(lambda rt, path, images: [1, 2, 3])
    assert result.status == "failed" and "one prediction per image" in result.message


# =========================================================================== the summary
def test_summary_cannot_be_forged() -> None:
    forged = checks.CheckResult(checks.EX_GUARD, "passed", "trust me")
    checks.results()[checks.EX_GUARD] = forged          # a copy: no effect
    assert checks.results().get(checks.EX_GUARD) is not forged
    with pytest.raises(Exception):
        forged.status = "failed"                   # frozen
    real = checks.check_output_guard
    try:
        checks.check_output_guard = lambda *a, **k: forged
        assert checks.check_output_guard(None).passed
        summary = checks.summary()
        assert "was replaced" in repr(summary)
        assert summary.items[checks.EX_GUARD] is None   # not counted, whatever was recorded before
    finally:
        checks.check_output_guard = real
    assert "was replaced" not in repr(checks.summary())
    assert checks.check_output_guard(None).status == "not done"
    assert checks.summary().items[checks.EX_GUARD].status == "not done"
