"""rknnlab.checks.lab02 (the Lab 2 checks) and the Lab 2 notebook, on the simulator.

Every exercise: the reference solution and a legitimately different one pass; at least
three planted wrong answers (the shortcuts a student finds) fail, each with a message
that names the problem and never the answer; the untouched stub gives "not done".  Then
the notebook runs twice: instructor edition (every check PASSED, in under 60 s) and
student edition (solution cells removed: runs to the end, every check NOT PASSED, "not
done yet", with a hint and no traceback).

Exercise 4's check runs six variants with rknnlab.run (about 12 s).  To keep this file
fast, the ``recorded`` fixture runs them once (the five letters, and the sixth variant
once per kind it may play) and ``cached_runs`` hands those real recorded runs to the
check in place of a new rknnlab.run; one test runs the check end to end.
"""
from __future__ import annotations

import ctypes
import os
import re
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pandas")

import labhelpers as lh  # noqa: E402
import rknnlab  # noqa: E402
from rknnlab.checks import _lab02_cases as cases  # noqa: E402
from rknnlab.checks import lab02 as checks  # noqa: E402
from rknnlab.experiment import growth as growth_module  # noqa: E402
from rknnlab.experiment.result import Result  # noqa: E402
from rknnlab.rknn import abi, buffers, errors  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
LAB = ROOT / "labs" / "lab02_lifecycle.ipynb"


pytestmark = pytest.mark.usefixtures("simulator")

_stub = lh.stub


_failed = lh.assert_failed_with_hint


@pytest.mark.parametrize("check", [checks.check_dup_prediction, checks.check_teardown,
                                   checks.check_load_from_buffer, checks.check_diagnose,
                                   checks.check_verdict])
def test_checks_never_raise_on_nothing(check) -> None:
    result = check(None)
    assert isinstance(result, checks.CheckResult)
    assert result.status == "not done" and not result.passed and result.hint


# =========================================================================== exercise 4 (find the leak)
@pytest.fixture(scope="module")
def recorded():
    os.environ["RKNNLAB_BACKEND"] = "sim"
    kw = dict(model=checks.LAB2_MODEL, iterations=checks.DIAGNOSE_ITERATIONS, warmup=5, progress=False,
              sample_calls=True)
    letters = rknnlab.run(cases.leak_cases()[:5], **kw)
    sixth = {}
    for kind in cases.KINDS:
        os.environ[cases.CASE_X_ENV] = kind
        sixth[kind] = rknnlab.run([cases.case_x], **kw).runs[0]
    del os.environ[cases.CASE_X_ENV]
    assert not letters.errors
    return letters, sixth


@pytest.fixture
def cached_runs(recorded, monkeypatch: pytest.MonkeyPatch):
    """rknnlab.run gives the recorded runs (the sixth as the kind the check drew)."""
    letters, sixth = recorded

    def run(variants, **kwargs):
        return Result(dict(letters.meta), list(letters.runs) + [sixth[os.environ[cases.CASE_X_ENV]]])

    monkeypatch.setattr(rknnlab, "run", run)


def _per_iteration(result, function: str) -> float:
    m = result.calls[result.calls["stage"] == "measure"]
    return float((m["function"] == function).sum()) / max(int(result.summary["iterations"].iloc[0]), 1)


def diagnose_reference(result):
    per = lambda f: _per_iteration(result, f)  # noqa: E731
    if per("init") >= 0.5:
        return "context_per_frame"
    if per("create_mem") - per("destroy_mem") >= 0.5:
        return "mems_not_destroyed"
    if per("outputs_get") - per("outputs_release") >= 0.5:
        return "outputs_not_released"
    if result.summary["heap_growth_per_iter_bytes"].iloc[0] > 1000:
        return "python_keeps_outputs"
    return "clean"


def diagnose_alternative(result):
    """Legitimately different: the heap and DMA totals from the samples (last minus first),
    calls counted with value_counts, the checks in another order."""
    s = result.samples[result.samples["stage"] == "measure"]

    def per_iteration(column):      # each source is sampled on its own: NaN where it was not read
        c = s[["iteration", column]].dropna()
        return (c[column].iloc[-1] - c[column].iloc[0]) / max(int(c["iteration"].iloc[-1] - c["iteration"].iloc[0]), 1)

    heap, dma = per_iteration("heap_in_use_bytes"), per_iteration("dma_bytes")
    counts = result.calls[result.calls["stage"] == "measure"]["function"].value_counts()
    inits = counts.get("init", 0)
    if dma > 1000 and inits == 0:
        return "mems_not_destroyed"
    if inits > 10:
        return "context_per_frame"
    if heap > 1000:
        return "outputs_not_released" if counts.get("outputs_release", 0) < counts.get("outputs_get", 0) / 2 \
            else "python_keeps_outputs"
    return "clean"


def diagnose_by_memory_only(result):
    """Memory alone: a Python list reads as a forgotten release, a context per frame as clean."""
    row = result.summary.iloc[0]
    s = result.samples[result.samples["stage"] == "measure"]["dma_bytes"].dropna()
    if s.iloc[-1] - s.iloc[0] > 100_000:
        return "mems_not_destroyed"
    return "outputs_not_released" if row["heap_growth_per_iter_bytes"] > 1000 else "clean"


def diagnose_by_calls_only(result):
    """Calls alone: the Python list reads as clean."""
    per = lambda f: _per_iteration(result, f)  # noqa: E731
    if per("init") >= 0.5:
        return "context_per_frame"
    if per("create_mem") >= 0.5:
        return "mems_not_destroyed"
    if per("outputs_release") < 0.5:
        return "outputs_not_released"
    return "clean"


def diagnose_by_rss_verdict(result):
    """RSS's verdict: every growing run is called a forgotten release."""
    return "outputs_not_released" if result.summary["rss_verdict"].iloc[0] == "grows" else "clean"


def test_ex4_end_to_end_reference_passes(capsys: pytest.CaptureFixture) -> None:
    result = checks.check_diagnose(diagnose_reference)
    assert result.passed, result
    assert len(result.details) == 6
    assert "Running 6 programs" in capsys.readouterr().out     # one line before the long runs


@pytest.mark.parametrize("rule", [diagnose_reference, diagnose_alternative])
def test_ex4_right_rules_pass(rule, cached_runs, monkeypatch: pytest.MonkeyPatch) -> None:
    for seed in range(5):        # the sixth variant plays another kind for each seed
        monkeypatch.setattr(checks, "_fresh_seed", lambda seed=seed: seed)
        result = checks.check_diagnose(rule)
        assert result.passed, result


def test_ex4_stub_not_done(cached_runs) -> None:
    assert checks.check_diagnose(_stub).status == "not done"
    assert checks.check_diagnose(lambda r: None).status == "not done"


@pytest.mark.parametrize("rule", [diagnose_by_memory_only, diagnose_by_calls_only, diagnose_by_rss_verdict])
def test_ex4_shortcuts_fail_without_the_answer(rule, cached_runs) -> None:
    text = _failed(checks.check_diagnose(rule), "is wrong", "calls")
    assert "should be" not in text
    for kind in cases.KINDS:       # the right word of the wrong answer is never shown
        assert f"not {kind!r}" not in text


@pytest.mark.parametrize("default", cases.KINDS)
def test_ex4_lookup_of_the_letters_fails(default, cached_runs, monkeypatch: pytest.MonkeyPatch) -> None:
    truth = dict(zip("ABCDE", cases._mystery_order()))
    by_name = {f"mystery_{k}": v for k, v in truth.items()}

    def lookup(result):
        return by_name.get(result.variants[0], default)

    for seed in range(50):       # a seed that draws the sixth variant as another kind than the default
        rng = np.random.default_rng(seed)
        if str(rng.choice(cases.KINDS)) != default:
            break
    monkeypatch.setattr(checks, "_fresh_seed", lambda: seed)
    _failed(checks.check_diagnose(lookup), "sixth variant")


def test_ex4_bad_words(cached_runs) -> None:
    _failed(checks.check_diagnose(lambda r: "leak"), "not one of")


# =========================================================================== exercise 1 (dup_context)
def predict_reference(sizes, n, how):
    w, i, io = sizes["weights"], sizes["internal"], sizes["io"]
    return n * (w + i + io) if how == "init" else w + n * (i + io)


def predict_alternative(sizes, n, how):
    """Legitimately different: one context's total, then what each further one adds."""
    one = sum(sizes.values())
    more = one if how == "init" else one - sizes["weights"]
    return float(one + (n - 1) * more)


def test_ex1_reference_and_alternative_pass() -> None:
    for rule in (predict_reference, predict_alternative):
        result = checks.check_dup_prediction(rule)
        assert result.passed, result
        assert len(result.details) == 4 and "All 16 predictions" in result.message


def test_ex1_stub_not_done() -> None:
    assert checks.check_dup_prediction(_stub).status == "not done"


@pytest.mark.parametrize("rule", [
    lambda s, n, how: n * (s["weights"] + s["internal"] + s["io"]),                       # weights per dup
    lambda s, n, how: n * (s["weights"] + s["internal"]) if how == "init"
    else s["weights"] + n * s["internal"],                                                 # io forgotten
    lambda s, n, how: n * (s["weights"] + s["internal"] + s["io"]) if how == "init"
    else s["weights"] + s["internal"] + n * s["io"],                                       # internal shared
    lambda s, n, how: n * sum(s.values()) if how == "init" else sum(s.values()),           # dup costs nothing
])
def test_ex1_wrong_predictions_fail(rule) -> None:
    text = _failed(checks.check_dup_prediction(rule), "bytes too", "weights, internal, io",
                   "1% of the measured total plus 4 KiB per context")
    assert len(text.splitlines()) <= 12
    assert "w + n" not in text and "shares the weights" not in text


class _DupCountsWeights:
    """A runtime whose RKNN_QUERY_MEM_SIZE counts the shared weights in a duplicate's own total
    (undocumented either way: the simulator's way is assumption A9)."""

    def __init__(self, rt):
        self._rt, self.dups = rt, set()

    def __getattr__(self, name):
        return getattr(self._rt, name)

    def dup_context(self, ctx):
        dup = self._rt.dup_context(ctx)
        self.dups.add(dup)
        return dup

    def query(self, ctx, what, *args, **kwargs):
        answer = self._rt.query(ctx, what, *args, **kwargs)
        if what == abi.RKNN_QUERY_MEM_SIZE and ctx in self.dups:
            answer.total_dma_allocated_size += answer.total_weight_size
        return answer


@pytest.fixture
def dup_counts_weights(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(checks, "_open_runtime", lambda: _DupCountsWeights(rknnlab.open_runtime()))


def test_ex1_runtime_that_counts_shared_weights_is_not_judged(dup_counts_weights) -> None:
    result = checks.check_dup_prediction(predict_reference)
    assert result.passed, result
    assert "cannot judge the dup predictions" in repr(result) and "A9" in repr(result)
    # what it can judge, it still judges: init predictions and one context
    _failed(checks.check_dup_prediction(lambda s, n, how: n * (s["weights"] + s["internal"])), "by init",
            "cannot judge")


def test_ex1_off_by_says_which_way() -> None:
    text = _failed(checks.check_dup_prediction(lambda s, n, how: n * sum(s.values())))
    assert "bytes too much" in text and "bytes too little" not in text
    text = _failed(checks.check_dup_prediction(lambda s, n, how: s["weights"] + n * s["internal"]))
    assert "bytes too little" in text


def test_ex1_not_a_number() -> None:
    _failed(checks.check_dup_prediction(lambda s, n, how: "a lot"), "not a whole number")


# =========================================================================== exercise 3 (load from a buffer)
def load_reference(rt, path):
    with open(path, "rb") as f:
        data = f.read()
    return rt.init(data)


def load_alternative(rt, path):
    """Legitimately different: a numpy buffer with an explicit size."""
    data = np.fromfile(path, dtype=np.uint8)
    ctx = rt.init(data, 0, None, data.nbytes)
    del data
    return ctx


def zero_copy_reference(rt, path):
    size = os.path.getsize(path)
    mem = rt.create_mem2(0, size, abi.RKNN_MEM_FLAG_ALLOC_NO_CONTEXT)
    with open(path, "rb") as f:
        f.readinto((ctypes.c_uint8 * size).from_address(mem.contents.virt_addr))
    extend = abi.rknn_init_extend(real_model_offset=0, real_model_size=size, model_buffer_fd=mem.contents.fd,
                                  model_buffer_flags=mem.contents.flags)
    return rt.init(mem.contents.virt_addr, abi.RKNN_FLAG_MODEL_BUFFER_ZERO_COPY, extend, size=size), mem


def zero_copy_alternative(rt, path):
    """Legitimately different: reads the bytes first, copies them with memmove, drops them."""
    data = Path(path).read_bytes()
    mem = rt.create_mem2(0, len(data), abi.RKNN_MEM_FLAG_ALLOC_NO_CONTEXT)
    ctypes.memmove(mem.contents.virt_addr, data, len(data))
    extend = abi.rknn_init_extend(real_model_size=len(data), model_buffer_fd=mem.contents.fd)
    size = len(data)
    del data
    ctx = rt.init(mem.contents.virt_addr, abi.RKNN_FLAG_MODEL_BUFFER_ZERO_COPY, extend, size=size)
    return ctx, mem


_KEPT = []


def load_from_path(rt, path):
    return rt.init(path)


def load_keeps_the_buffer(rt, path):
    with open(path, "rb") as f:
        data = f.read()
    _KEPT.append(data)              # "in case the runtime needs it"
    return rt.init(data)


def zero_copy_without_the_flag(rt, path):
    size = os.path.getsize(path)
    mem = rt.create_mem2(0, size, abi.RKNN_MEM_FLAG_ALLOC_NO_CONTEXT)
    ctypes.memmove(mem.contents.virt_addr, Path(path).read_bytes(), size)
    return rt.init(mem.contents.virt_addr, 0, None, size=size), mem


def zero_copy_frees_early(rt, path):
    """The API reference's own sample: rknn_destroy_mem while the context lives."""
    ctx, mem = zero_copy_reference(rt, path)
    rt.destroy_mem(0, mem)
    return ctx, mem


def zero_copy_returns_another_mem(rt, path):
    ctx, _mem = zero_copy_reference(rt, path)
    return ctx, rt.create_mem2(0, 4096, abi.RKNN_MEM_FLAG_ALLOC_NO_CONTEXT)


def zero_copy_keeps_the_bytes(rt, path):
    data = Path(path).read_bytes()
    _KEPT.append(data)
    mem = rt.create_mem2(0, len(data), abi.RKNN_MEM_FLAG_ALLOC_NO_CONTEXT)
    ctypes.memmove(mem.contents.virt_addr, data, len(data))
    extend = abi.rknn_init_extend(real_model_size=len(data), model_buffer_fd=mem.contents.fd)
    return rt.init(mem.contents.virt_addr, abi.RKNN_FLAG_MODEL_BUFFER_ZERO_COPY, extend, size=len(data)), mem


def zero_copy_without_extend(rt, path):
    """p.18's reading of the API reference: extend NULL."""
    size = os.path.getsize(path)
    mem = rt.create_mem2(0, size, abi.RKNN_MEM_FLAG_ALLOC_NO_CONTEXT)
    buffers.mem_view(mem)[:size] = np.fromfile(path, dtype=np.uint8)
    return rt.init(mem.contents.virt_addr, abi.RKNN_FLAG_MODEL_BUFFER_ZERO_COPY, None, size=size), mem


def zero_copy_passes_the_bytes(rt, path):
    data = Path(path).read_bytes()
    return rt.init(data, abi.RKNN_FLAG_MODEL_BUFFER_ZERO_COPY), None


def test_ex3_reference_and_alternative_pass() -> None:
    for load, zero in ((load_reference, zero_copy_reference), (load_alternative, zero_copy_alternative)):
        result = checks.check_load_from_buffer(load, zero)
        assert result.passed, result


def test_ex3_without_extend_passes_with_a_note() -> None:
    result = checks.check_load_from_buffer(load_reference, zero_copy_without_extend)
    assert result.passed, result
    note = [d for d in result.details if d.startswith("Note:")]
    assert len(note) == 1 and "p.18" in note[0] and "p.20" in note[0] and "no rknn_init_extend" in note[0] and "A42" in note[0]
    assert "see the note" in result.message


def test_ex3_model_buffer_flags_missing_is_a_note() -> None:
    result = checks.check_load_from_buffer(load_reference, zero_copy_alternative)   # extend without flags
    assert result.passed and any("model_buffer_flags" in d for d in result.details), result
    result = checks.check_load_from_buffer(load_reference, zero_copy_reference)
    assert result.passed and not any(d.startswith("Note:") for d in result.details), result


def test_ex3_error_hint_is_about_the_function_that_failed() -> None:
    text = _failed(checks.check_load_from_buffer(load_reference, zero_copy_passes_the_bytes),
                   "load_zero_copy(rt, model_path) raised", "C block")
    assert "read the file into a buffer, then rt.init(buffer)" not in text     # the other function's hint
    assert "an argument is wrong" not in text                                    # the runtime's generic list


def test_ex3_heap_is_judged_against_the_checks_own_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    """A runtime whose init mallocs more than a copy of the file (parsed graph, tables): a right
    load still passes, because the check's own loads pay the same."""
    from rknnlab.sim import runtime as sim_runtime
    real_init = sim_runtime.SimRuntime.init
    kept = []

    def init_that_mallocs(self, *args, **kwargs):
        kept.append(ctypes.create_string_buffer(3 * 2**20))     # freed with the test, as a leak would not be
        return real_init(self, *args, **kwargs)

    monkeypatch.setattr(sim_runtime.SimRuntime, "init", init_that_mallocs)
    result = checks.check_load_from_buffer(load_reference, zero_copy_reference)
    assert result.passed, result
    _failed(checks.check_load_from_buffer(load_keeps_the_buffer, zero_copy_reference), "still alive")
    _KEPT.clear()


def test_ex3_stubs_not_done() -> None:
    assert checks.check_load_from_buffer(_stub, _stub).status == "not done"
    half = checks.check_load_from_buffer(load_reference, _stub)
    assert half.status == "not done" and "load_zero_copy" in half.message


@pytest.mark.parametrize("load, zero, expected", [
    (load_from_path, zero_copy_reference, "a path"),
    (load_keeps_the_buffer, zero_copy_reference, "Your buffer is still alive"),
    (zero_copy_reference, zero_copy_reference, "RKNN_FLAG_MODEL_BUFFER_ZERO_COPY: that is the second"),
    (load_reference, zero_copy_without_the_flag, "more than the check's own zero-copy load"),
    (load_reference, zero_copy_frees_early, "called rknn_destroy_mem"),
    (load_reference, zero_copy_returns_another_mem, "does not read its model from that mem"),
    (load_reference, zero_copy_keeps_the_bytes, "more than the check's own zero-copy load"),
])
def test_ex3_wrong_loads_fail(load, zero, expected) -> None:
    try:
        _failed(checks.check_load_from_buffer(load, zero), expected)
    finally:
        _KEPT.clear()


# =========================================================================== exercise 2 (teardown)
def teardown_reference(rt, contexts, mems, model_mem=None):
    for ctx, mem in mems:
        rt.destroy_mem(ctx, mem)
    for ctx in contexts:
        rt.destroy(ctx)
    if model_mem is not None:
        rt.destroy_mem(0, model_mem)


def teardown_alternative(rt, contexts, mems, model_mem=None):
    """Legitimately different: context by context (its mems, then it), the model buffer in a finally."""
    try:
        for ctx in contexts:
            for owner, mem in reversed(list(mems)):
                if owner == ctx:
                    rt.destroy_mem(ctx, mem)
            rt.destroy(ctx)
    finally:
        if model_mem:
            rt.destroy_mem(0, model_mem)


def teardown_destroy_first(rt, contexts, mems, model_mem=None):
    for ctx in contexts:
        rt.destroy(ctx)
    for ctx, mem in mems:
        rt.destroy_mem(ctx, mem)
    if model_mem is not None:
        rt.destroy_mem(0, model_mem)


def teardown_leaves_mems_to_destroy(rt, contexts, mems, model_mem=None):
    for ctx in contexts:
        rt.destroy(ctx)
    if model_mem is not None:
        rt.destroy_mem(0, model_mem)


def teardown_model_first(rt, contexts, mems, model_mem=None):
    """The API reference's sample order: the model buffer before rknn_destroy."""
    if model_mem is not None:
        rt.destroy_mem(0, model_mem)
    teardown_reference(rt, contexts, mems)


def teardown_forgets_the_model(rt, contexts, mems, model_mem=None):
    teardown_reference(rt, contexts, mems)


def teardown_twice(rt, contexts, mems, model_mem=None):
    teardown_reference(rt, contexts, mems, model_mem)
    rt.destroy(contexts[0])


def teardown_model_with_the_dead_context(rt, contexts, mems, model_mem=None):
    teardown_reference(rt, contexts, mems)
    if model_mem is not None:
        rt.destroy_mem(contexts[0], model_mem)


def teardown_one_context_at_a_time(rt, contexts, mems, model_mem=None):
    """Lab 2's single-context answer applied per context: the model buffer goes with the first
    context, while its duplicate still reads it (only the dup scene shows it)."""
    for ctx in contexts:
        for owner, mem in mems:
            if owner == ctx:
                rt.destroy_mem(ctx, mem)
        rt.destroy(ctx)
        if model_mem is not None and ctx == contexts[0]:
            rt.destroy_mem(0, model_mem)


def teardown_one_context_is_enough(rt, contexts, mems, model_mem=None):
    """"A duplicate shares the context, so one rknn_destroy frees both"."""
    for ctx, mem in mems:
        rt.destroy_mem(ctx, mem)
    rt.destroy(contexts[0])
    if model_mem is not None:
        rt.destroy_mem(0, model_mem)


def test_ex2_first_in_a_fresh_process_passes(tmp_path: Path) -> None:
    """A process's first rknn_init may open files it keeps: not the scene's file descriptors."""
    import subprocess
    import sys
    code = ("import sys; sys.path.insert(0, %r)\n"
            "from test_checks_lab02 import teardown_reference\n"
            "from rknnlab.checks import lab02\n"
            "r = lab02.check_teardown(teardown_reference)\n"
            "print(r); sys.exit(0 if r.passed else 1)\n") % str(ROOT / "tests")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def test_ex2_reference_and_alternative_pass() -> None:
    for teardown in (teardown_reference, teardown_alternative):
        result = checks.check_teardown(teardown)
        assert result.passed, result
        assert len(result.details) == 4 and "#532" not in repr(result)


def test_ex2_stub_not_done() -> None:
    assert checks.check_teardown(_stub).status == "not done"
    assert checks.check_teardown(lambda rt, contexts, mems, model_mem=None: None).status == "not done"


@pytest.mark.parametrize("teardown, expected", [
    (teardown_destroy_first, "that was already destroyed failed"),
    (teardown_leaves_mems_to_destroy, "were left to rknn_destroy"),
    (teardown_model_first, "destroyed while"),
    (teardown_forgets_the_model, "never destroyed"),
    (teardown_twice, "already destroyed"),
    (teardown_model_with_the_dead_context, "made with no context"),
    (teardown_one_context_at_a_time, "dup: the zero-copy model buffer was destroyed while 1 of the 2"),
    (teardown_one_context_is_enough, "dup: rknn_destroy was called 0 time(s)"),
])
def test_ex2_wrong_orders_fail(teardown, expected) -> None:
    text = _failed(checks.check_teardown(teardown), expected)
    assert "teardown rule in the lab's header" in text
    # the check never states the order: none of the rule's sentences, no ordered recipe
    for giveaway in ("before that context", "after the last", "your own buffers last", "then the context"):
        assert giveaway not in text, giveaway


class _KeepsModelFd:
    """The runtime of airockchip/rknn-toolkit2#532: rknn_destroy_mem of an ALLOC_NO_CONTEXT mem
    frees it but leaves its file descriptor open (here: the same fd number, re-opened on the
    same buffer)."""

    def __init__(self, rt):
        self._rt, self.kept, self.no_context = rt, [], set()

    def __getattr__(self, name):
        return getattr(self._rt, name)

    def create_mem2(self, ctx, size, alloc_flags):
        mem = self._rt.create_mem2(ctx, size, alloc_flags)
        if alloc_flags & abi.RKNN_MEM_FLAG_ALLOC_NO_CONTEXT:
            self.no_context.add(ctypes.addressof(mem.contents))
        return mem

    def destroy_mem(self, ctx, mem):
        if mem and ctypes.addressof(mem.contents) in self.no_context:
            fd = int(mem.contents.fd)
            saved = os.dup(fd)
            ret = self._rt.destroy_mem(ctx, mem)
            os.dup2(saved, fd)
            os.close(saved)
            self.kept.append(fd)
            return ret
        return self._rt.destroy_mem(ctx, mem)

    def close(self):
        for fd in self.kept:
            os.close(fd)
        self._rt.close()


@pytest.fixture
def runtime_keeps_model_fd(monkeypatch: pytest.MonkeyPatch):
    made = []

    def open_runtime():
        made.append(_KeepsModelFd(rknnlab.open_runtime()))
        return made[-1]

    monkeypatch.setattr(checks, "_open_runtime", open_runtime)
    return made


def test_ex2_runtime_fd_leak_is_not_the_students(runtime_keeps_model_fd) -> None:
    result = checks.check_teardown(teardown_reference)
    assert result.passed, result
    assert runtime_keeps_model_fd[0].kept           # the fake really left the fds open
    leak_lines = [d for d in result.details if "#532" in d]
    assert len(leak_lines) == 2 and all("not counted against you" in d for d in leak_lines)


def test_ex2_without_the_warm_up_measurement_the_fake_leak_would_fail(runtime_keeps_model_fd,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The fake really leaves fds open: a check that did not measure its own teardown would blame the student."""
    monkeypatch.setattr(checks, "_runtime_keeps_model_fd", lambda *a: False)
    _failed(checks.check_teardown(teardown_reference), "are still held after teardown")


def test_ex2_runtime_fd_leak_does_not_hide_the_students(runtime_keeps_model_fd) -> None:
    _failed(checks.check_teardown(teardown_forgets_the_model), "never destroyed")

    def forgets_the_scratch_mem(rt, contexts, mems, model_mem=None):
        teardown_reference(rt, contexts, [(c, m) for c, m in mems if m.contents.size != 4096], model_mem)

    _failed(checks.check_teardown(forgets_the_scratch_mem), "were left to rknn_destroy")


class _RefusesZeroCopyDup:
    """A runtime whose rknn_dup_context refuses a zero-copy context (no document says it accepts one)."""

    def __init__(self, rt):
        self._rt, self.zero_copy, self.refused = rt, set(), 0

    def __getattr__(self, name):
        return getattr(self._rt, name)

    def init(self, model, flag=0, extend=None, size=None):
        ctx = self._rt.init(model, flag, extend, size)
        if flag & abi.RKNN_FLAG_MODEL_BUFFER_ZERO_COPY:
            self.zero_copy.add(ctx)
        return ctx

    def dup_context(self, ctx):
        if ctx in self.zero_copy:
            self.refused += 1
            raise errors.error_for(abi.RKNN_ERR_CTX_INVALID, "rknn_dup_context")
        return self._rt.dup_context(ctx)


def test_ex2_a_runtime_that_refuses_to_dup_a_zero_copy_context_skips_that_scene(monkeypatch) -> None:
    made = []
    monkeypatch.setattr(checks, "_open_runtime", lambda: made.append(_RefusesZeroCopyDup(rknnlab.open_runtime()))
                        or made[-1])
    result = checks.check_teardown(teardown_reference)
    assert result.passed, result
    assert made[0].refused == 1                      # the fake really refused
    notes = [d for d in result.details if d.startswith("Note:")]
    assert len(notes) == 1 and "dup: skipped" in notes[0] and "A23" in notes[0], notes
    assert len(result.details) == 4 and "(see the note)" in result.message
    # the other scenes are still judged
    _failed(checks.check_teardown(teardown_model_first), "destroyed while")


class _DestroyForgets:
    """A runtime whose rknn_destroy returns 0 and frees nothing (the context still answers);
    ``backend`` says which path of the check runs; every query on a context already passed
    to rknn_destroy is recorded."""

    def __init__(self, rt, backend):
        self._rt, self.backend, self.destroyed, self.late_queries = rt, backend, set(), 0

    def __getattr__(self, name):
        return getattr(self._rt, name)

    def destroy(self, ctx):
        self.destroyed.add(ctx)
        return 0

    def query(self, ctx, what, *args, **kwargs):
        if ctx in self.destroyed:
            self.late_queries += 1
        return self._rt.query(ctx, what, *args, **kwargs)


class _OnABoard(_DestroyForgets):
    """Board path with a runtime whose rknn_destroy works."""

    def destroy(self, ctx):
        self.destroyed.add(ctx)
        return self._rt.destroy(ctx)


def _fake(monkeypatch, cls, *args):
    made = []
    monkeypatch.setattr(checks, "_open_runtime", lambda: made.append(cls(rknnlab.open_runtime(), *args))
                        or made[-1])
    return made


def test_ex2_only_the_simulator_is_asked_about_destroyed_contexts(monkeypatch) -> None:
    """On the simulator the check queries each context after teardown; on a board (a call on a
    destroyed context is undocumented there) it never does, and judges by the recorded calls."""
    made = _fake(monkeypatch, _DestroyForgets, "sim")
    _failed(checks.check_teardown(teardown_reference), "still answers rknn_query after teardown")
    assert made[0].late_queries > 0
    made = _fake(monkeypatch, _DestroyForgets, "native")
    text = _failed(checks.check_teardown(teardown_reference), "are still held after teardown")
    assert "rknn_query" not in text and made[0].late_queries == 0


def test_ex2_on_a_board_judges_by_the_recorded_calls(monkeypatch) -> None:
    made = _fake(monkeypatch, _OnABoard, "native")
    result = checks.check_teardown(teardown_reference)
    assert result.passed, result
    for teardown, expected in ((teardown_destroy_first, "that was already destroyed failed"),
                               (teardown_model_first, "destroyed while"),
                               (teardown_one_context_is_enough, "dup: rknn_destroy was called 0 time(s)"),
                               (teardown_twice, "already destroyed")):
        _failed(checks.check_teardown(teardown), expected)
    assert made and all(m.late_queries == 0 for m in made)


def test_ex2_another_live_context_passes_with_a_note() -> None:
    def with_the_first_context(rt, contexts, mems, model_mem=None):
        teardown_reference(rt, contexts, [(contexts[0], m) for _c, m in mems], model_mem)

    result = checks.check_teardown(with_the_first_context)
    assert result.passed, result
    notes = [d for d in result.details if d.startswith("Note:")]
    assert len(notes) == 1 and notes[0].startswith("Note: dup:") and "with another" in notes[0], notes
    assert "(see the note)" in result.message
    assert not [d for d in checks.check_teardown(teardown_reference).details if d.startswith("Note:")]


def test_lab_solution_destroys_the_duplicates_first() -> None:
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.read(LAB, as_version=4)
    solution = next(c.source for c in nb.cells if "solution" in (c.metadata.get("tags") or [])
                    and c.source.startswith("def teardown"))
    assert "the duplicates first: the course's choice (no document says)" in solution
    assert "in any order" not in solution


# =========================================================================== exercise 5 ★ (does it grow?)
R = checks.RESOLUTION


def verdict_reference(trace):
    it = trace["iteration"].to_numpy(float)
    v = trace["rss_bytes"].to_numpy(float)
    if np.ptp(it) < 100 or len(it) < 24:
        return "cannot tell yet"
    edges = np.linspace(it.min(), it.max() + 1, 13)
    floors = np.array([v[(it >= a) & (it < b)].min() for a, b in zip(edges[:-1], edges[1:])])[4:]
    steps = np.diff(floors) / (edges[1] - edges[0])
    slope = float(np.median(steps))
    spread = 1.4826 * float(np.median(np.abs(steps - slope))) / np.sqrt(len(steps))
    if slope - 2 * spread > R / 2 and (steps > 0.25 * slope).mean() >= 2 / 3:
        return "grows"
    if abs(slope) + 2 * spread < R:
        return "flat"
    return "cannot tell yet"


def verdict_by_the_library(trace):
    """Legitimately different: chapter 2's growth verdict (rknnlab.experiment.growth)."""
    g = growth_module.growth(trace["iteration"], trace["rss_bytes"], growth_module.RSS_STEP, R)
    return g.verdict


def verdict_last_minus_first(trace):
    v, it = trace["rss_bytes"].to_numpy(float), trace["iteration"].to_numpy(float)
    return "grows" if (v[-1] - v[0]) / (it[-1] - it[0]) > R else "flat"


def verdict_max_minus_min(trace):
    v = trace["rss_bytes"]
    return "grows" if v.max() - v.min() > 2**20 else "flat"


def verdict_least_squares(trace):
    """A slope with its interval, on every sample: the one-off step reads as a leak."""
    x, y = trace["iteration"].to_numpy(float), trace["rss_bytes"].to_numpy(float)
    if len(x) < 24:
        return "cannot tell yet"
    b, a = np.polyfit(x, y, 1)
    r = y - (a + b * x)
    se = np.sqrt((r ** 2).sum() / (len(x) - 2) / ((x - x.mean()) ** 2).sum())
    if b - 2 * se > 0 and b > R:
        return "grows"
    return "flat" if abs(b) + 2 * se < R else "cannot tell yet"


def verdict_never_unsure(trace):
    """The reference's floors, but never 'cannot tell yet'."""
    word = verdict_reference(trace) if np.ptp(trace["iteration"]) >= 100 else "flat"
    return "flat" if word == "cannot tell yet" else word


@pytest.mark.parametrize("rule", [verdict_reference, verdict_by_the_library])
def test_ex5_right_verdicts_pass(rule, monkeypatch: pytest.MonkeyPatch) -> None:
    for seed in range(20):
        monkeypatch.setattr(checks, "_fresh_seed", lambda seed=seed: seed)
        result = checks.check_verdict(rule)
        assert result.passed, (seed, result)


def test_ex5_stub_not_done() -> None:
    assert checks.check_verdict(_stub).status == "not done"


@pytest.mark.parametrize("rule, trap", [
    (verdict_last_minus_first, "rising once"),
    (verdict_max_minus_min, "then level under page-sized jitter"),
    (verdict_least_squares, "rising once"),
    (verdict_never_unsure, "too few iterations"),
])
def test_ex5_wrong_verdicts_fail(rule, trap, monkeypatch: pytest.MonkeyPatch) -> None:
    for seed in range(3):
        monkeypatch.setattr(checks, "_fresh_seed", lambda seed=seed: seed)
        _failed(checks.check_verdict(rule), trap, "verdicts are wrong")


def test_ex5_words() -> None:
    _failed(checks.check_verdict(lambda t: "leak"), "not one of")
    assert checks.check_verdict(lambda t: "cannot tell").status == "failed"   # a word, but wrong for most


def test_ex5_practice_traces_are_fixed_and_of_every_kind() -> None:
    a, b = checks.practice_traces(), checks.practice_traces()
    assert len(a) == 4 and all(x.equals(y) for x, y in zip(a, b))
    assert sorted(verdict_reference(t) for t in a) == ["cannot tell yet", "flat", "flat", "grows"]


# =========================================================================== the truth stays private
def test_no_truth_table_in_the_namespace() -> None:
    public = {k for k in vars(checks) if not k.startswith("_")}
    assert not {"TRACE_TRUTH", "leak_truth", "trace_cases", "make_trace", "measure_contexts"} & public
    for f in checks.MYSTERY.values():
        assert not f.__doc__ and f.__name__.startswith("mystery_")


def test_summary_cannot_be_forged() -> None:
    lh.assert_summary_cannot_be_forged(checks, checks.EX_DUP, "check_dup_prediction")


# =========================================================================== the notebook
def test_lab_notebook_structure() -> None:
    nb, text = lh.read_saved_lab(LAB, (
        "**Questions**", "**Objectives**", "## Key points", "## Further reading", "## Your results",
        "A widely copied recipe says", "**What the runtime does:**", "**Evidence:**",
        "```{admonition} Wrong claim:", "```text", "★", "min)", "examples/c/"))
    assert "seed 00" not in text.lower()
    code = [c for c in nb.cells if c.cell_type == "code"]
    # a long run shows the library's progress bar in JupyterLab (and nothing in the book)
    assert not any("progress=False" in c.source for c in code)
    lh.assert_solutions_override_their_stubs(nb)


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_lab_states_the_chapters_rules_in_its_words() -> None:
    """One rule per concept: every rule of chapter 2's key points that the lab uses is in the lab's
    rules and key points, word for word; the objectives have the chapter's verbs, in exercise order."""
    nbformat = pytest.importorskip("nbformat")
    chapter = nbformat.read(ROOT / "chapters" / "02_lifecycle.ipynb", as_version=4)
    keys = next(c.source for c in chapter.cells if c.cell_type == "markdown" and c.source.startswith("## Key points"))
    rules = [_flat(item) for item in re.split(r"\n- ", keys.split("\n\n")[1].lstrip("- "))
             if "COLLECT_MODEL_INFO_ONLY" not in item]
    assert len(rules) >= 6
    lab = nbformat.read(LAB, as_version=4)
    header = _flat(lab.cells[0].source)
    key_points = _flat(next(c.source for c in lab.cells if c.source.startswith("## Key points")))
    for rule in rules:
        assert rule in header and rule in key_points, rule
    verbs = re.findall(r"\d\. \*\*(\w+)\*\*", header)
    assert verbs == ["Predict", "Order", "Load", "Find"], verbs
    headings = [c.source.split("\n")[0] for c in lab.cells if c.source.startswith("## Exercise")]
    assert [h.split()[2] for h in headings] == ["1", "2", "3", "4", "5"], headings


test_lab_instructor_edition_passes_every_check, test_lab_student_edition_runs_and_reports_not_done = \
    lh.edition_tests(LAB, n_checks=5)


def zero_copy_extend_zeroed(rt, path):
    """A C habit: memset the extend to 0 and fill only the size: no fd."""
    size = os.path.getsize(path)
    mem = rt.create_mem2(0, size, abi.RKNN_MEM_FLAG_ALLOC_NO_CONTEXT)
    buffers.mem_view(mem)[:size] = np.fromfile(path, dtype=np.uint8)
    extend = abi.rknn_init_extend(real_model_size=size, model_buffer_flags=mem.contents.flags)
    return rt.init(mem.contents.virt_addr, abi.RKNN_FLAG_MODEL_BUFFER_ZERO_COPY, extend, size=size), mem


def test_ex3_an_extend_without_the_fd_gets_a_note() -> None:
    result = checks.check_load_from_buffer(load_reference, zero_copy_extend_zeroed)
    assert result.passed, result
    notes = [d for d in result.details if d.startswith("Note:")]
    assert len(notes) == 1 and "model_buffer_fd is 0" in notes[0], notes


def test_ex3_the_dma_line_says_in_place_only_on_the_simulator(monkeypatch) -> None:
    result = checks.check_load_from_buffer(load_reference, zero_copy_reference)
    line = next(d for d in result.details if d.startswith("the context's DMA total"))
    assert "read in place" in line and "A5" in line, line
    _fake(monkeypatch, _OnABoard, "native")
    result = checks.check_load_from_buffer(load_reference, zero_copy_reference)
    assert result.passed, result
    line = next(d for d in result.details if d.startswith("the context's DMA total"))
    assert "in place" not in line and "A5" not in line and "bytes of weights" in line, line
