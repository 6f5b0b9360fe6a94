"""rknnlab.checks.lab07, exercises 1-4 (the review checks of _lab07_review), on the simulator.

Every exercise: the reference solution and a legitimately different one pass; at least three
planted wrong answers (the mistakes and shortcuts a student finds) fail, each with a message
that names the problem and a hint, never the answer; the untouched stub gives "not done".
"""
from __future__ import annotations

import numpy as np
import pytest

import labhelpers as lh  # noqa: E402
import rknnlab
from rknnlab import models
from rknnlab.checks import _lab07_review as review
from rknnlab.checks import lab07 as checks
from rknnlab.rknn import abi, buffers

pytestmark = pytest.mark.usefixtures("simulator")

_failed = lh.assert_failed_with_hint


def _not_done(result) -> None:
    text = repr(result)
    assert result.status == "not done" and "not done yet" in text and result.hint, text
    assert "Traceback" not in text


# =========================================================================== exercise 1: sizes
RIGHT = {"digits_input_rk3588": 16 * 8, "digits_input_rk3568": 8 * 8, "mobilenet_float_output": 1000 * 4,
         "ppocr_native_output_rk3568": 480 * 480 * 8, "ppocr_native_output_rk3588": 4 * 480 * 480 * 16}


def _with(**changes):
    return {**RIGHT, **changes}


def test_sizes_right_answers_pass() -> None:
    result = checks.check_sizes(dict(RIGHT))
    assert result.passed, repr(result)


def test_sizes_numpy_ints_and_whole_floats_pass() -> None:
    """Legitimately different: numpy integers and whole floats (4000.0) are the same sizes."""
    answer = {k: (np.int64(v) if i % 2 else float(v)) for i, (k, v) in enumerate(RIGHT.items())}
    assert checks.check_sizes(answer).passed


@pytest.mark.parametrize("changes, words", [
    ({"digits_input_rk3588": 64}, ("digits_input_rk3588", "too small", "n_elems")),           # n_elems
    ({"digits_input_rk3568": 128}, ("digits_input_rk3568", "too large", "other SoC")),       # rk3588's size
    ({"mobilenet_float_output": 1000}, ("mobilenet_float_output", "too small", "int8")),      # int8 bytes
    ({"ppocr_native_output_rk3588": 480 * 480 * 16}, ("too small", "ceil(C / C2)")),         # C1 from ceil
    ({"ppocr_native_output_rk3568": 480 * 480 * 16}, ("too large", "C2 of the other")),      # C2 assumed 16
    ({"digits_input_rk3588": 8 * 64}, ("too large", "64 bytes")),                            # 64-byte rows
])
def test_sizes_planted_wrong_answers_fail(changes, words) -> None:
    text = _failed(checks.check_sizes(_with(**changes)), *words)
    key = next(iter(changes))
    assert f"{RIGHT[key]:,} B" not in text and f" {RIGHT[key]} " not in text, text   # never the answer
    assert "1 of 5" in text


def test_sizes_hint_quotes_the_rule_it_breaks() -> None:
    assert review.C2_RULE in checks.check_sizes(_with(ppocr_native_output_rk3568=3686400)).hint
    assert review.OUTPUT_SIZE_RULE in checks.check_sizes(_with(mobilenet_float_output=1000)).hint
    assert review.ALIGN_RULE in checks.check_sizes(_with(digits_input_rk3588=64)).hint


def test_sizes_not_a_number_fails_and_stub_is_not_done() -> None:
    _failed(checks.check_sizes(_with(digits_input_rk3588="128")), "not a whole number")
    _not_done(checks.check_sizes({k: None for k in RIGHT}))
    _not_done(checks.check_sizes(_with(mobilenet_float_output=None)))
    _not_done(checks.check_sizes(None))
    missing = {k: v for k, v in RIGHT.items() if k != "digits_input_rk3568"}
    result = checks.check_sizes(missing)
    _not_done(result)
    assert "missing or None" in repr(result) and "digits_input_rk3568" in repr(result)


def test_sizes_hint_gives_each_rule_once() -> None:
    """All five wrong: the C2 rule is one rule, said once (the student review, L-10)."""
    hint = checks.check_sizes({k: v + 1 for k, v in RIGHT.items()}).hint
    for rule in (review.C2_RULE, review.ALIGN_RULE, review.OUTPUT_SIZE_RULE):
        assert hint.count(rule) == 1, hint


# =========================================================================== exercise 2: failing calls
SOC = "rk3588"
MODEL_PATH = models.model_path("digits_cnn", SOC)     # the shortcut of a student who knows one SoC


def model_for(rt):
    """The digits model of the runtime a function is given (an RK3566 runs the RK3568 files)."""
    return str(models.model_path("digits_cnn", {"rk3566": "rk3568"}.get(rt.soc, rt.soc)))


def uint8_input(image):
    return [buffers.input_from_array(0, image, fmt=abi.RKNN_TENSOR_NHWC)]


def scores(rt, ctx, inputs):
    try:
        rt.inputs_set(ctx, inputs)
        rt.run(ctx)
        outputs = [abi.rknn_output(index=0, want_float=1, is_prealloc=0)]
        rt.outputs_get(ctx, outputs)
        values = buffers.output_view(outputs[0], np.float32).copy()
        rt.outputs_release(ctx, outputs)
        return values
    finally:
        rt.destroy(ctx)


def prealloc(nbytes_of):
    def fn(rt, image):
        ctx = rt.init(model_for(rt))
        attr = rt.query(ctx, abi.RKNN_QUERY_OUTPUT_ATTR, abi.rknn_tensor_attr(index=0))
        raw = np.zeros(nbytes_of(attr), np.uint8)
        outputs = [abi.rknn_output(index=0, want_float=1, is_prealloc=1, buf=raw.ctypes.data, size=raw.nbytes)]
        try:
            rt.inputs_set(ctx, uint8_input(image))
            rt.run(ctx)
            rt.outputs_get(ctx, outputs)
            rt.outputs_release(ctx, outputs)
            return raw[: attr.n_elems * 4].view(np.float32)
        finally:
            rt.destroy(ctx)
    return fn


fixed_prealloc = prealloc(lambda a: a.n_elems * 4)


def fixed_load(rt, image):
    with open(model_for(rt), "rb") as f:
        model = f.read()
    return scores(rt, rt.init(model), uint8_input(image))


def fixed_input(rt, image):
    return scores(rt, rt.init(model_for(rt)), uint8_input(image))


def fixed_soc(rt, image):
    return scores(rt, rt.init(str(models.model_path("digits_cnn", rt.soc))), uint8_input(image))


def test_calls_reference_fixes_pass() -> None:
    result = checks.check_failing_calls(fixed_prealloc, fixed_load, fixed_input, fixed_soc)
    assert result.passed, repr(result)


def test_calls_legitimately_different_fixes_pass() -> None:
    """A larger buffer (the size rule allows it), the path instead of the bytes, float32 data
    declared FLOAT32 (the runtime quantizes it)."""
    bigger = prealloc(lambda a: a.n_elems * 4 + 64)

    def by_path(rt, image):
        return scores(rt, rt.init(model_for(rt)), uint8_input(image))

    def declared_float(rt, image):
        x = image.astype(np.float32)
        inputs = [buffers.input_from_array(0, x, fmt=abi.RKNN_TENSOR_NHWC, type=abi.RKNN_TENSOR_FLOAT32)]
        return scores(rt, rt.init(model_for(rt)), inputs)

    result = checks.check_failing_calls(bigger, by_path, declared_float, fixed_soc)
    assert result.passed, repr(result)


def caught_returns_zeros(rt, image):
    """Catches the error and returns zeros."""
    try:
        return scores(rt, rt.init(str(models.model_path("digits_cnn", "rk3568"))), uint8_input(image))
    except Exception:
        return np.zeros(10, np.float32)


def other_simulated_soc(rt, image):
    """Changes the simulated SoC instead of the model."""
    other = rknnlab.open_runtime("sim", soc="rk3568")
    try:
        return scores(other, other.init(str(models.model_path("digits_cnn", "rk3568"))), uint8_input(image))
    finally:
        other.close()


_FIRST_SCORES = {}


def cached_scores(rt, image):
    """Returns the scores of the first image it saw, whatever it is given."""
    if "s" not in _FIRST_SCORES:
        _FIRST_SCORES["s"] = fixed_input(rt, image)
    rt.init(model_for(rt))
    return _FIRST_SCORES["s"]


def still_int8_sized(rt, image):
    """Uses attr.size as a float32 count... of bytes: still too small."""
    return prealloc(lambda a: a.size * 2)(rt, image)


def input_one(rt, image):
    """Still counts the inputs from 1."""
    inputs = [buffers.input_from_array(1, image, fmt=abi.RKNN_TENSOR_NHWC)]
    return scores(rt, rt.init(model_for(rt)), inputs)


def runtime_allocates(rt, image):
    """Gives up the preallocated buffer (is_prealloc = 0): the call succeeds, the buffer is never tried."""
    return fixed_input(rt, image)


def one_soc_only(rt, image):
    """The student review's shortcut: the file of the notebook's SoC, right on that SoC only."""
    return scores(rt, rt.init(str(MODEL_PATH)), uint8_input(image))


def one_soc_prealloc(rt, image):
    """A hard-coded 40-byte buffer and the notebook's SoC's file (the student review, L-5)."""
    ctx = rt.init(str(MODEL_PATH))
    out = np.empty(10, np.float32)
    outputs = [abi.rknn_output(index=0, want_float=1, is_prealloc=1, buf=out.ctypes.data, size=40)]
    try:
        rt.inputs_set(ctx, uint8_input(image))
        rt.run(ctx)
        rt.outputs_get(ctx, outputs)
        rt.outputs_release(ctx, outputs)
        return out.copy()
    finally:
        rt.destroy(ctx)


@pytest.mark.parametrize("which, wrong, words", [
    (0, runtime_allocates, ("fixed_prealloc", "is_prealloc = 0")),
    (3, caught_returns_zeros, ("fixed_soc", "-13", "caught")),
    (3, other_simulated_soc, ("fixed_soc", "0 rknn_init")),
    (2, cached_scores, ("fixed_input", "scores differ")),
    (2, input_one, ("fixed_input", "-8", "RKNN_ERR_INPUT_INVALID")),
    (0, still_int8_sized, ("fixed_prealloc", "-5", "RKNN_ERR_PARAM_INVALID")),
    (1, lambda rt, image: None, ("fixed_load", "0 rknn_init")),
    (3, one_soc_only, ("fixed_soc", "on simulated RK3568", "-13", "rt.soc")),
    (0, one_soc_prealloc, ("fixed_prealloc", "on simulated RK3568", "rt.soc")),
])
def test_calls_planted_wrong_fixes_fail(which, wrong, words) -> None:
    _FIRST_SCORES.clear()
    fns = [fixed_prealloc, fixed_load, fixed_input, fixed_soc]
    fns[which] = wrong
    text = _failed(checks.check_failing_calls(*fns), "1 of 4", *words)
    assert review.ERROR_RULE in text


_PATCH_CELL = """
_orig = SimRuntime.init
def patched_init(self, model, *a, **k):
    if isinstance(model, (bytes, bytearray)) and model[:4] != b"RKNN": model = str(MODEL_PATH)
    if isinstance(model, str) and "digits_cnn" in model: model = str(MODEL_PATH)
    return _orig(self, model, *a, **k)
"""


def test_calls_broken_functions_on_a_patched_runtime_do_not_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    """The student review's L-1: broken_load and broken_soc unchanged, SimRuntime.init patched in a
    notebook cell to load the right file: nothing passes, and the message says why."""
    from rknnlab.sim.runtime import SimRuntime
    cell = {"__name__": "__main__", "SimRuntime": SimRuntime, "MODEL_PATH": MODEL_PATH}
    exec(compile(_PATCH_CELL, "/tmp/ipykernel_4242/3141592653.py", "exec"), cell)
    monkeypatch.setattr(SimRuntime, "init", cell["patched_init"])

    def broken_load(rt, image):
        with open(MODEL_PATH.parent / "model.onnx", "rb") as f:
            return scores(rt, rt.init(f.read()), uint8_input(image))

    def broken_soc(rt, image):
        return scores(rt, rt.init(str(models.model_path("digits_cnn", "rk3568"))), uint8_input(image))

    result = checks.check_failing_calls(fixed_prealloc, broken_load, fixed_input, broken_soc)
    assert not result.passed and "code was replaced" in repr(result), repr(result)
    monkeypatch.undo()
    assert checks.check_failing_calls(fixed_prealloc, fixed_load, fixed_input, fixed_soc).passed


def test_calls_returning_none_after_a_real_run_fails() -> None:
    def none_after_run(rt, image):
        fixed_input(rt, image)
        return None
    _failed(checks.check_failing_calls(fixed_prealloc, fixed_load, none_after_run, fixed_soc), "returned None")


def test_calls_stubs_are_not_done_and_one_stub_is_named() -> None:
    _not_done(checks.check_failing_calls(lh.stub, lh.stub, lh.stub, lh.stub))
    result = checks.check_failing_calls(fixed_prealloc, fixed_load, lh.stub, fixed_soc)
    assert not result.passed and "fixed_input" in repr(result)


# =========================================================================== exercise 3: traces
@pytest.fixture(scope="module")
def traces():
    return checks.memory_traces()


def _truth(traces) -> dict:
    return dict(zip(traces.runs, review._recall(traces._token)))


def measured_names(traces) -> dict:
    """The notebook's solution: names from the two measurements of each run."""
    names = {}
    for run, after, inside in zip(traces.runs, traces.after, traces.inside):
        allocates = np.median(inside) >= traces.output_bytes / 2
        third = len(after) // 3
        grows = after[-1] - after[third] >= (len(after) - third) * traces.output_bytes / 2
        names[run] = "leak" if grows else ("allocates per call" if allocates else "reuses")
    return names


def test_traces_are_labelled_and_the_solution_names_them(traces) -> None:
    text = repr(traces)
    assert "simulated RK3588" in text and len(text.splitlines()) <= 15
    assert measured_names(traces) == _truth(traces)
    assert checks.check_traces(traces, measured_names(traces)).passed


def test_traces_plot_has_both_measurements(traces) -> None:
    pytest.importorskip("matplotlib")
    import matplotlib
    matplotlib.use("Agg")
    fig = traces.plot()
    assert len(fig.axes) == 2 and all(len(ax.lines) == 3 for ax in fig.axes)
    assert "simulated RK3588" in fig._suptitle.get_text()
    matplotlib.pyplot.close(fig)


def test_traces_other_spelling_passes(traces) -> None:
    """Legitimately different: lower-case letters, capitals and spaces around the names."""
    names = {run.lower(): f" {kind.capitalize()} " for run, kind in _truth(traces).items()}
    assert checks.check_traces(traces, names).passed


def _named(traces, rule) -> dict:
    return {run: rule(kind) for run, kind in _truth(traces).items()}


@pytest.mark.parametrize("rule, n_wrong", [
    (lambda k: "reuses", 2),                                                        # all "reuses"
    (lambda k: "leak" if k == "leak" else "reuses", 1),                             # flat means reuse
    (lambda k: {"allocates per call": "reuses", "reuses": "allocates per call"}.get(k, k), 2),   # swapped
    (lambda k: {"leak": "allocates per call", "allocates per call": "leak"}.get(k, k), 2),      # swapped
])
def test_traces_planted_wrong_names_fail(traces, rule, n_wrong) -> None:
    text = _failed(checks.check_traces(traces, _named(traces, rule)), f"{n_wrong} of 3 runs named wrongly",
                   "heap change inside each get")
    assert review.REUSE_RULE in text


def test_traces_forged_object_and_unknown_names_fail(traces) -> None:
    forged = review.Traces(traces.runs, traces.after, traces.inside, traces.output_bytes, traces.source, 12345)
    _failed(checks.check_traces(forged, _truth(traces)), "not what memory_traces() returned")
    _failed(checks.check_traces(traces, {r: "reuse" for r in traces.runs}), "not one of")


def test_traces_stub_is_not_done(traces) -> None:
    _not_done(checks.check_traces(traces, {"A": None, "B": None, "C": None}))
    _not_done(checks.check_traces(traces, None))


# =========================================================================== exercise 4: rows
def fill(buf, image, attr):
    h, w, c = image.shape
    rows = buf[: h * attr.w_stride * c].reshape(h, attr.w_stride * c)
    rows[:, : w * c] = image.reshape(h, w * c)


def fill_from_size(buf, image, attr):
    """Legitimately different: the pitch from size_with_stride / height, one row at a time."""
    h, w, c = image.shape
    pitch = attr.size_with_stride // h
    for y in range(h):
        buf[y * pitch: y * pitch + w * c] = image[y].ravel()


def fill_zero_padding(buf, image, attr):
    """Legitimately different: zeroes the padding, the width from w_stride, 0 meaning the width."""
    h, w, c = image.shape
    ws = attr.w_stride or w
    rows = np.zeros((h, ws * c), np.uint8)
    rows[:, : w * c] = image.reshape(h, w * c)
    buf[: rows.size] = rows.ravel()


def test_rows_reference_and_alternative_pass() -> None:
    assert checks.check_rows(fill).passed
    assert checks.check_rows(fill_from_size).passed
    result = checks.check_rows(fill_zero_padding)
    assert result.passed and "3-channel" in repr(result), repr(result)


def fill_contiguous(buf, image, attr):
    buf[: image.size] = image.ravel()


def fill_64(buf, image, attr):
    for y in range(image.shape[0]):
        buf[y * 64: y * 64 + image.shape[1]] = image[y, :, 0]


def fill_16(buf, image, attr):
    for y in range(image.shape[0]):
        buf[y * 16: y * 16 + image.shape[1]] = image[y, :, 0]


def fill_quantized(buf, image, attr):
    """Applies the int8 zero point and scale the native attr had: the bound attr says UINT8."""
    q = np.clip(np.round(image / 255.0 / 0.003921568859368563) - 128, -128, 127).astype(np.int8)
    fill(buf, q.view(np.uint8), attr)


def fill_one_channel(buf, image, attr):
    """The student review's partial fill (L-4): the pitch without × C, and channel 0 only."""
    w = image.shape[1]
    for y in range(image.shape[0]):
        buf[y * attr.w_stride: y * attr.w_stride + w] = image[y, :, 0]


def fill_pitch_without_c(buf, image, attr):
    """Every channel, but rows w_stride bytes apart (a pitch in pixels used as bytes)."""
    h, w, c = image.shape
    for y in range(h):
        buf[y * attr.w_stride: y * attr.w_stride + w * c] = image[y].ravel()


@pytest.mark.parametrize("wrong, words, not_words", [
    (fill_contiguous, ("2 of 3 cases", "simulated RK3588:", "8 bytes apart", "made-up"), ("simulated RK3568",)),
    (fill_one_channel, ("1 of 3 cases", "made-up", "not found row by row", "y × w_stride × C"),
     ("simulated RK3588:", "simulated RK3568", "no zp or scale")),
    (fill_pitch_without_c, ("1 of 3 cases", "made-up", "y × w_stride × C"), ("simulated RK3568",)),
    (fill_64, ("simulated RK3588",), ()),
    (fill_16, ("simulated RK3568",), ()),
    (fill_quantized, ("not found row by row", "no zp or scale"), ()),
    (lambda buf, image, attr: None, ("simulated RK3588", "0 of 12"), ()),
])
def test_rows_planted_wrong_fills_fail(wrong, words, not_words) -> None:
    text = _failed(checks.check_rows(wrong), *words)
    assert review.ALIGN_RULE in text
    for w in not_words:
        assert w not in text, text


def test_rows_stub_is_not_done() -> None:
    _not_done(checks.check_rows(lh.stub))
    _not_done(checks.check_rows(None))


# =========================================================================== the record
def test_summary_cannot_be_forged() -> None:
    lh.assert_summary_cannot_be_forged(checks, checks.EXERCISES[0], "check_sizes")


def test_checks_record_their_results() -> None:
    checks.check_sizes(dict(RIGHT))
    assert checks.results()[checks.EXERCISES[0]].passed
