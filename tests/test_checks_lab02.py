"""rknnlab.checks.lab02 (the Lab 2 checks) and the Lab 2 notebook, on the simulator.

Every exercise: the reference solution and a legitimately different one pass; at least
three planted wrong answers (the shortcuts a student finds) fail, each with a message
that names the problem and never the answer; the untouched stub gives "not done".  Then
the notebook runs twice: instructor edition (every check PASSED, in under 60 s) and
student edition (solution cells removed: runs to the end, every check NOT PASSED, "not
done yet", with a hint and no traceback).

Exercise 1's check runs six variants with rknnlab.run (about 12 s).  To keep this file
fast, the ``recorded`` fixture runs them once (the five letters, and the sixth variant
once per kind it may play) and ``cached_runs`` hands those real recorded runs to the
check in place of a new rknnlab.run; one test runs the check end to end.
"""
from __future__ import annotations

import ast
import ctypes
import os
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pandas")

import rknnlab  # noqa: E402
from rknnlab.checks import _lab02_cases as cases  # noqa: E402
from rknnlab.checks import lab02 as checks  # noqa: E402
from rknnlab.experiment import growth as growth_module  # noqa: E402
from rknnlab.experiment.result import Result  # noqa: E402
from rknnlab.rknn import abi  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
LAB = ROOT / "labs" / "lab02_lifecycle.ipynb"


@pytest.fixture(autouse=True)
def _simulator(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RKNNLAB_BACKEND", "sim")
    monkeypatch.delenv("RKNNLAB_SIM_SOC", raising=False)


def _stub(*args, **kwargs):
    raise NotImplementedError("your code here")


def _failed(result, *words: str) -> str:
    text = repr(result)
    assert result.status == "failed" and not result.passed, text
    assert result.hint, text
    assert "Traceback" not in text and "seed 0" not in text.lower()
    for w in words:
        assert w in text, f"{w!r} not in:\n{text}"
    return text


@pytest.mark.parametrize("check", [checks.check_diagnose, checks.check_dup_prediction,
                                   checks.check_load_from_buffer, checks.check_teardown,
                                   checks.check_verdict])
def test_checks_never_raise_on_nothing(check) -> None:
    result = check(None)
    assert isinstance(result, checks.CheckResult)
    assert result.status == "not done" and not result.passed and result.hint


# =========================================================================== exercise 1 (find the leak)
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


def test_ex1_end_to_end_reference_passes() -> None:
    result = checks.check_diagnose(diagnose_reference)
    assert result.passed, result
    assert len(result.details) == 6


@pytest.mark.parametrize("rule", [diagnose_reference, diagnose_alternative])
def test_ex1_right_rules_pass(rule, cached_runs, monkeypatch: pytest.MonkeyPatch) -> None:
    for seed in range(5):        # the sixth variant plays another kind for each seed
        monkeypatch.setattr(checks, "_fresh_seed", lambda seed=seed: seed)
        result = checks.check_diagnose(rule)
        assert result.passed, result


def test_ex1_stub_not_done(cached_runs) -> None:
    assert checks.check_diagnose(_stub).status == "not done"
    assert checks.check_diagnose(lambda r: None).status == "not done"


@pytest.mark.parametrize("rule", [diagnose_by_memory_only, diagnose_by_calls_only, diagnose_by_rss_verdict])
def test_ex1_shortcuts_fail_without_the_answer(rule, cached_runs) -> None:
    text = _failed(checks.check_diagnose(rule), "is wrong", "calls")
    assert "should be" not in text
    for kind in cases.KINDS:       # the right word of the wrong answer is never shown
        assert f"not {kind!r}" not in text


@pytest.mark.parametrize("default", cases.KINDS)
def test_ex1_lookup_of_the_letters_fails(default, cached_runs, monkeypatch: pytest.MonkeyPatch) -> None:
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


def test_ex1_bad_words(cached_runs) -> None:
    _failed(checks.check_diagnose(lambda r: "leak"), "not one of")


# =========================================================================== exercise 2 (dup_context)
def predict_reference(sizes, n, how):
    w, i, io = sizes["weights"], sizes["internal"], sizes["io"]
    return n * (w + i + io) if how == "init" else w + n * (i + io)


def predict_alternative(sizes, n, how):
    """Legitimately different: one context's total, then what each further one adds."""
    one = sum(sizes.values())
    more = one if how == "init" else one - sizes["weights"]
    return float(one + (n - 1) * more)


def test_ex2_reference_and_alternative_pass() -> None:
    for rule in (predict_reference, predict_alternative):
        result = checks.check_dup_prediction(rule)
        assert result.passed, result
        assert len(result.details) == 4 and "All 16 predictions" in result.message


def test_ex2_stub_not_done() -> None:
    assert checks.check_dup_prediction(_stub).status == "not done"


@pytest.mark.parametrize("rule", [
    lambda s, n, how: n * (s["weights"] + s["internal"] + s["io"]),                       # weights per dup
    lambda s, n, how: n * (s["weights"] + s["internal"]) if how == "init"
    else s["weights"] + n * s["internal"],                                                 # io forgotten
    lambda s, n, how: n * (s["weights"] + s["internal"] + s["io"]) if how == "init"
    else s["weights"] + s["internal"] + n * s["io"],                                       # internal shared
    lambda s, n, how: n * sum(s.values()) if how == "init" else sum(s.values()),           # dup costs nothing
])
def test_ex2_wrong_predictions_fail(rule) -> None:
    text = _failed(checks.check_dup_prediction(rule), "off by", "weights, internal, io")
    assert len(text.splitlines()) <= 12
    assert "w + n" not in text and "shares the weights" not in text


def test_ex2_not_a_number() -> None:
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
    extend = abi.rknn_init_extend(real_model_offset=0, real_model_size=size, model_buffer_fd=mem.contents.fd)
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


def test_ex3_reference_and_alternative_pass() -> None:
    for load, zero in ((load_reference, zero_copy_reference), (load_alternative, zero_copy_alternative)):
        result = checks.check_load_from_buffer(load, zero)
        assert result.passed, result


def test_ex3_stubs_not_done() -> None:
    assert checks.check_load_from_buffer(_stub, _stub).status == "not done"
    half = checks.check_load_from_buffer(load_reference, _stub)
    assert half.status == "not done" and "load_zero_copy" in half.message


@pytest.mark.parametrize("load, zero, expected", [
    (load_from_path, zero_copy_reference, "a path"),
    (load_keeps_the_buffer, zero_copy_reference, "yours is still alive"),
    (zero_copy_reference, zero_copy_reference, "RKNN_FLAG_MODEL_BUFFER_ZERO_COPY: that is the second"),
    (load_reference, zero_copy_without_the_flag, "a copy of the model is held"),
    (load_reference, zero_copy_frees_early, "called rknn_destroy_mem"),
    (load_reference, zero_copy_returns_another_mem, "does not read its model from that mem"),
    (load_reference, zero_copy_keeps_the_bytes, "a copy of the model is held"),
])
def test_ex3_wrong_loads_fail(load, zero, expected) -> None:
    try:
        _failed(checks.check_load_from_buffer(load, zero), expected)
    finally:
        _KEPT.clear()


# =========================================================================== exercise 4 (teardown)
def teardown_reference(rt, ctx, mems, model_mem=None):
    for mem in mems:
        rt.destroy_mem(ctx, mem)
    rt.destroy(ctx)
    if model_mem is not None:
        rt.destroy_mem(0, model_mem)


def teardown_alternative(rt, ctx, mems, model_mem=None):
    """Legitimately different: the mems in reverse order, the model buffer in a finally."""
    try:
        for mem in reversed(list(mems)):
            rt.destroy_mem(ctx, mem)
        rt.destroy(ctx)
    finally:
        if model_mem:
            rt.destroy_mem(0, model_mem)


def teardown_destroy_first(rt, ctx, mems, model_mem=None):
    rt.destroy(ctx)
    for mem in mems:
        rt.destroy_mem(ctx, mem)
    if model_mem is not None:
        rt.destroy_mem(0, model_mem)


def teardown_leaves_mems_to_destroy(rt, ctx, mems, model_mem=None):
    rt.destroy(ctx)
    if model_mem is not None:
        rt.destroy_mem(0, model_mem)


def teardown_model_first(rt, ctx, mems, model_mem=None):
    """The API reference's sample order: the model buffer before rknn_destroy."""
    if model_mem is not None:
        rt.destroy_mem(0, model_mem)
    for mem in mems:
        rt.destroy_mem(ctx, mem)
    rt.destroy(ctx)


def teardown_forgets_the_model(rt, ctx, mems, model_mem=None):
    for mem in mems:
        rt.destroy_mem(ctx, mem)
    rt.destroy(ctx)


def teardown_twice(rt, ctx, mems, model_mem=None):
    teardown_reference(rt, ctx, mems, model_mem)
    rt.destroy(ctx)


def teardown_model_with_the_dead_context(rt, ctx, mems, model_mem=None):
    for mem in mems:
        rt.destroy_mem(ctx, mem)
    rt.destroy(ctx)
    if model_mem is not None:
        rt.destroy_mem(ctx, model_mem)


def test_ex4_first_in_a_fresh_process_passes(tmp_path: Path) -> None:
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


def test_ex4_reference_and_alternative_pass() -> None:
    for teardown in (teardown_reference, teardown_alternative):
        result = checks.check_teardown(teardown)
        assert result.passed, result
        assert len(result.details) == 3


def test_ex4_stub_not_done() -> None:
    assert checks.check_teardown(_stub).status == "not done"
    assert checks.check_teardown(lambda rt, ctx, mems, model_mem=None: None).status == "not done"


@pytest.mark.parametrize("teardown, expected", [
    (teardown_destroy_first, "failed"),
    (teardown_leaves_mems_to_destroy, "were left to rknn_destroy"),
    (teardown_model_first, "destroyed before rknn_destroy"),
    (teardown_forgets_the_model, "never destroyed"),
    (teardown_twice, "failed"),
    (teardown_model_with_the_dead_context, "rt.destroy_mem(0, model_mem)"),
])
def test_ex4_wrong_orders_fail(teardown, expected) -> None:
    text = _failed(checks.check_teardown(teardown), expected)
    assert "No document gives the order" in text


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
    forged = checks.CheckResult(checks.EX_DUP, "passed", "trust me")
    checks.results()[checks.EX_DUP] = forged
    assert checks.results().get(checks.EX_DUP) is not forged
    real = checks.check_dup_prediction
    try:
        checks.check_dup_prediction = lambda *a, **k: forged
        assert "was replaced" in repr(checks.summary())
    finally:
        checks.check_dup_prediction = real
    assert "was replaced" not in repr(checks.summary())


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
    for heading in ("**Questions**", "**Objectives**", "## Key points", "## Further reading", "## Your results",
                    "A widely copied recipe says", "**What the runtime does:**", "**Evidence:**",
                    "```{admonition} Wrong claim:", "```text", "★", "min)", "examples/c/"):
        assert heading in text, heading
    assert "seed 00" not in text.lower()
    code = [c for c in nb.cells if c.cell_type == "code"]
    for k, cell in enumerate(code):
        if "solution" in (cell.metadata.get("tags") or []):
            # the cell before is the stub: the solution defines the same names, so it overrides it
            assert _defined_names(cell.source) >= _defined_names(code[k - 1].source) > set(), cell.source[:80]


def _check_outputs(nb):
    out = []
    for cell in _check_cells(nb):
        texts = [o["data"]["text/plain"] for o in cell.get("outputs", []) if o.get("output_type") == "execute_result"]
        errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
        assert not errors, f"{cell.source}: {errors[0].get('ename')}: {errors[0].get('evalue')}"
        assert len(texts) == 1, f"{cell.source}: no check result shown"
        out.append((cell.source.strip(), texts[0]))
    return out


@pytest.mark.timeout(300)
def test_lab_instructor_edition_passes_every_check(execute_notebook) -> None:
    nbformat = pytest.importorskip("nbformat")
    from rknnlab.book.editions import apply_edition
    nb = apply_edition(nbformat.read(LAB, as_version=4), "instructor")
    elapsed = execute_notebook(nb, LAB)
    results = _check_outputs(nb)
    assert len(results) == 5
    for source, text in results:
        assert text.startswith("PASSED"), f"{source}\n{text}"
    assert elapsed < 60, f"the instructor edition took {elapsed:.0f} s (budget 60 s)"


@pytest.mark.timeout(300)
def test_lab_student_edition_runs_and_reports_not_done(execute_notebook) -> None:
    nbformat = pytest.importorskip("nbformat")
    from rknnlab.book.editions import apply_edition
    nb = apply_edition(nbformat.read(LAB, as_version=4), "student")
    assert not any("solution" in (c.metadata.get("tags") or []) for c in nb.cells)
    execute_notebook(nb, LAB)   # raises CellExecutionError if any cell fails
    results = _check_outputs(nb)
    assert len(results) == 5
    for source, text in results:
        assert text.startswith("NOT PASSED") and "not done yet" in text, f"{source}\n{text}"
        assert "Hint:" in text and "Traceback" not in text, text
