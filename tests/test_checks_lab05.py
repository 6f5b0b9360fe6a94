"""rknnlab.checks.lab05 (the Lab 5 checks) and the Lab 5 notebook, on the simulator.

Every exercise: the reference solution and a legitimately different one pass; at least
three planted wrong answers (the shortcuts a student finds) fail, each with a message that
names the problem and a hint, never the answer; the untouched stub gives "not done".  Then
the notebook runs twice: instructor edition (every check PASSED, in under 60 s) and student
edition (solution cells removed: runs to the end, every check NOT PASSED, "not done yet",
with a hint and no traceback).
"""
from __future__ import annotations

import re
import statistics
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pandas")

import labhelpers as lh  # noqa: E402
from rknnlab.checks import _lab05_cases as cases  # noqa: E402
from rknnlab.checks import lab05 as checks  # noqa: E402
from rknnlab.profile import cpu  # noqa: E402
from rknnlab.rknn import abi  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
LAB = ROOT / "labs" / "lab05_allocation.ipynb"
CHAPTER = ROOT / "chapters" / "05_allocation.ipynb"

pytestmark = pytest.mark.usefixtures("simulator")

_failed = lh.assert_failed_with_hint
ALL_CHECKS = [checks.check_sram_hits, checks.check_outside_setup, checks.check_shared_internal,
              checks.check_cache_choice, checks.check_shape_change]


def _seeded(monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    monkeypatch.setattr(checks, "_fresh_seed", lambda: seed)


@pytest.mark.parametrize("check", ALL_CHECKS)
def test_checks_never_raise_on_nothing(check) -> None:
    result = check(None)
    assert isinstance(result, checks.CheckResult)
    assert result.status == "not done" and not result.passed and result.hint


@pytest.mark.parametrize("check", ALL_CHECKS)
def test_stubs_are_not_done(check) -> None:
    result = check(lh.stub)
    assert result.status == "not done", result
    assert "Traceback" not in repr(result)


# =========================================================================== exercise 3 (SRAM hits)
PAGE = 4096


def _is_io(r):
    return r["producer_layer_id"] == 0 or r["user"] == "OutputOperator"


def sram_reference(rows, total_internal_size, free_sram):
    pages = min(free_sram // PAGE, -(-total_internal_size // PAGE))
    sram_end = pages * PAGE
    return [0 if _is_io(r) else max(0, min(r["end"], sram_end) - r["start"]) for r in rows]


def sram_with_numpy(rows, total_internal_size, free_sram):
    """Legitimately different: numpy clips, the SRAM part from a page-rounded buffer size,
    numpy ints returned."""
    need = (total_internal_size + PAGE - 1) // PAGE * PAGE
    end = min(need, free_sram - free_sram % PAGE)
    starts = np.array([r["start"] for r in rows])
    ends = np.array([r["end"] for r in rows])
    hits = np.clip(np.minimum(ends, end) - starts, 0, None)
    hits[[i for i, r in enumerate(rows) if _is_io(r)]] = 0
    return list(hits)


def sram_whole_tensors_only(rows, total_internal_size, free_sram):
    """A tensor counts only when all of it fits: partial hits missed."""
    end = min(free_sram // PAGE, -(-total_internal_size // PAGE)) * PAGE
    return [0 if _is_io(r) or r["end"] > end else r["size"] for r in rows]


def sram_one_mib(rows, total_internal_size, free_sram):
    """'RK3588 has 1 MB of SRAM': the free size ignored."""
    return sram_reference(rows, total_internal_size, 1 << 20)


def sram_counts_io(rows, total_internal_size, free_sram):
    """The input and output rows counted like internal tensors."""
    end = min(free_sram // PAGE, -(-total_internal_size // PAGE)) * PAGE
    return [max(0, min(r["end"], end) - r["start"]) for r in rows]


def sram_whole_budget(rows, total_internal_size, free_sram):
    """The SoC's 956 KiB, whatever another context holds."""
    return sram_reference(rows, total_internal_size, cases.RK3588_SRAM)


def sram_counts_output(rows, total_internal_size, free_sram):
    """Only the input row left out: the output row counted like an internal tensor."""
    end = min(free_sram, total_internal_size)
    return [0 if r["producer_layer_id"] == 0 else max(0, min(r["end"], end) - r["start"]) for r in rows]


def sram_whole_tensor_if_it_starts_in_sram(rows, total_internal_size, free_sram):
    """A tensor that starts in SRAM counted whole (its part beyond the SRAM's end too)."""
    end = min(free_sram, total_internal_size)
    return [0 if _is_io(r) else (r["size"] if r["start"] < end else 0) for r in rows]


def sram_plan_floored_to_pages(rows, total_internal_size, free_sram):
    """The plan's size rounded down to pages: the tail of a plan that fits in SRAM is lost."""
    end = min(free_sram // PAGE, total_internal_size // PAGE) * PAGE
    return [0 if _is_io(r) else max(0, min(r["end"], end) - r["start"]) for r in rows]


def sram_bytes_no_cap(rows, total_internal_size, free_sram):
    """Legitimately different (the review's shortcut, right because no row ends after the
    buffer): the free SRAM in bytes, not capped by the buffer's size, no page arithmetic."""
    return [0 if _is_io(r) else max(0, min(r["end"], free_sram) - r["start"]) for r in rows]


def sram_cumulative(rows, total_internal_size, free_sram):
    """Tensors laid one after another (the plan's offsets ignored): reuse missed."""
    end, at, out = min(free_sram, total_internal_size), 0, []
    for r in rows:
        out.append(0 if _is_io(r) else max(0, min(at + r["size"], end) - at))
        at += 0 if _is_io(r) else r["size"]
    return out


@pytest.mark.parametrize("rule", [sram_reference, sram_with_numpy, sram_bytes_no_cap])
def test_ex3_right_rules_pass(rule, monkeypatch: pytest.MonkeyPatch) -> None:
    for seed in (1, 2, 3):
        _seeded(monkeypatch, seed)
        result = checks.check_sram_hits(rule)
        assert result.passed, result


@pytest.mark.parametrize("rule", [sram_whole_tensors_only, sram_one_mib, sram_counts_io, sram_whole_budget,
                                  sram_cumulative, sram_counts_output, sram_whole_tensor_if_it_starts_in_sram,
                                  sram_plan_floored_to_pages])
def test_ex3_wrong_rules_fail(rule, monkeypatch: pytest.MonkeyPatch) -> None:
    _seeded(monkeypatch, 1)
    text = _failed(checks.check_sram_hits(rule), "rows wrong", "4 KiB pages", "than the expected total")
    assert "should be" not in text and "the runtime's" not in text
    if text.count("rows wrong") < int(re.search(r"(\d+) of \d+ plans have wrong rows", text).group(1)):
        assert "(first 6 shown)" in text


def test_ex3_failures_show_counts_not_values(monkeypatch: pytest.MonkeyPatch) -> None:
    """A failure names plans, their free SRAM and counts of wrong rows, never a byte count the
    rule gives (other than a free size it was handed)."""
    _seeded(monkeypatch, 4)
    text = repr(checks.check_sram_hits(sram_one_mib))
    plans = checks._sram_cases(np.random.default_rng(4))
    truths = {v for *_, truth in plans for v in truth if v > 99999}
    given = {free for _, _, _, free, _ in plans}
    shown = {int(n.replace(",", "")) for n in re.findall(r"\d[\d,]{5,}", text)}
    assert shown and not shown & truths - given


def test_ex3_bad_answers() -> None:
    _failed(checks.check_sram_hits(lambda rows, t, f: [0] * (len(rows) - 1)), "values for")
    _failed(checks.check_sram_hits(lambda rows, t, f: 5), "not a list")


def test_ex3_made_up_plans_have_partial_hits_and_both_budgets() -> None:
    """The made-up plans hold what the traps need: a tensor cut by the SRAM's end, plans
    larger and smaller than the free SRAM, an input row at offset 0."""
    rng = np.random.default_rng(0)
    partial = larger = smaller = 0
    for _ in range(40):
        rows, total, free = cases.made_up_plan(rng)
        hits = cases.sram_hits(rows, total, free)
        partial += any(0 < h < r["size"] for h, r in zip(hits, rows))
        larger += total > free
        smaller += total <= free
        assert rows[0]["start"] == 0 and hits[0] == 0 and hits[-1] == 0
    assert partial > 10 and larger > 10 and smaller > 3


def test_ex3_plans_that_fit_lose_their_tail_when_floored() -> None:
    """made_up_plan(fits=True): the plan fits in the free SRAM, is not whole pages, and an
    internal tensor ends at its last byte."""
    rng = np.random.default_rng(3)
    for _ in range(20):
        rows, total, free = cases.made_up_plan(rng, fits=True)
        assert total < free and total % PAGE and free % PAGE == 0
        assert cases.sram_hits(rows, total, free) != sram_plan_floored_to_pages(rows, total, free)


def test_ex3_the_rule_matches_rockchips_own_table() -> None:
    """The SRAM note's example (mobilenet_v1, 512 KiB of SRAM from 0xff3e0000): its SramHit
    column and 'Predict SRAM Hit RW Amount: 6688768' follow from the rule."""
    base = 0xff3e0000
    table = [(0xff404c00, 0xff466c00, 0x5b400), (0xff466c00, 0xff52ac00, 0), (0xff3e0000, 0xff411000, 0x31000),
             (0xff411000, 0xff473000, 0x4f000), (0xff3ed000, 0xff3ed400, 0x400)]
    rows = [{"start": s - base, "end": e - base, "size": e - s, "user": "ConvRelu", "producer_layer_id": 1}
            for s, e, _ in table]
    assert cases.sram_hits(rows, 0xff5eec00 - base, 512 * 1024) == [h for *_, h in table]


@pytest.mark.parametrize("holder", [None, "mobilenet_v2_160"])
def test_ex3_the_rule_matches_the_simulators_table(holder) -> None:
    """The simulator's own SRAM table (RKNN_LOG_LEVEL=3 text) gives the hits the check's rule
    gives, with all of the SRAM free and with part of it held by another context."""
    import rknnlab
    from rknnlab import allocation, models
    rt = rknnlab.open_runtime()
    held = rt.init(str(models.model_path(holder, "rk3588")), abi.RKNN_FLAG_ENABLE_SRAM) if holder else None
    try:
        for model in ("mobilenet_v2", "yolov5n", "resnet50"):
            free = (rt.query(held, abi.RKNN_QUERY_MEM_SIZE).free_sram_size if held else cases.RK3588_SRAM)
            ctx = rt.init(str(models.model_path(model, "rk3588")), abi.RKNN_FLAG_ENABLE_SRAM)
            try:
                table = allocation.sram_hits(rt.sram_log(ctx))
            finally:
                rt.destroy(ctx)
            rows, total = checks.plan_of(model)
            assert len(table) == len(rows)
            assert table["sram_hit_bytes"].fillna(0).astype(int).tolist() == cases.sram_hits(rows, total, free), model
    finally:
        if held:
            rt.destroy(held)
    assert not holder or free < cases.RK3588_SRAM


# =========================================================================== exercise 1 (MEM_ALLOC_OUTSIDE)
def outside_reference(rt, model_path):
    ctx = rt.init(model_path, abi.RKNN_FLAG_MEM_ALLOC_OUTSIDE)
    size = rt.query(ctx, abi.RKNN_QUERY_MEM_SIZE)
    rt.set_weight_mem(ctx, rt.create_mem(ctx, size.total_weight_size))
    rt.set_internal_mem(ctx, rt.create_mem(ctx, size.total_internal_size))
    return ctx


def outside_one_buffer(rt, model_path):
    """Legitimately different: one create_mem2 (cacheable) holding both parts, two views of
    it at different offsets, the internal memory set before the weights."""
    ctx = rt.init(model_path, abi.RKNN_FLAG_MEM_ALLOC_OUTSIDE)
    size = rt.query(ctx, abi.RKNN_QUERY_MEM_SIZE)
    w, i = size.total_weight_size, size.total_internal_size
    big = rt.create_mem2(ctx, w + i, abi.RKNN_FLAG_MEMORY_CACHEABLE).contents
    rt.set_internal_mem(ctx, rt.create_mem_from_fd(ctx, big.fd, big.virt_addr, w + i, w))
    rt.set_weight_mem(ctx, rt.create_mem_from_fd(ctx, big.fd, big.virt_addr, w, 0))
    return ctx


def outside_as_given(rt, model_path):
    """The lab's setup: the weights forgotten."""
    ctx = rt.init(model_path, abi.RKNN_FLAG_MEM_ALLOC_OUTSIDE)
    size = rt.query(ctx, abi.RKNN_QUERY_MEM_SIZE)
    rt.set_internal_mem(ctx, rt.create_mem(ctx, size.total_internal_size))
    return ctx


def outside_weights_sized_as_internal(rt, model_path):
    """Both mems from one size field."""
    ctx = rt.init(model_path, abi.RKNN_FLAG_MEM_ALLOC_OUTSIDE)
    size = rt.query(ctx, abi.RKNN_QUERY_MEM_SIZE)
    rt.set_weight_mem(ctx, rt.create_mem(ctx, size.total_internal_size))
    rt.set_internal_mem(ctx, rt.create_mem(ctx, size.total_internal_size))
    return ctx


def outside_flag_dropped(rt, model_path):
    """'It runs without the flag': the runtime allocates everything again."""
    return rt.init(model_path)


def outside_internal_only(rt, model_path):
    """INTERNAL_ALLOC_OUTSIDE: the runtime keeps the weights."""
    ctx = rt.init(model_path, abi.RKNN_FLAG_INTERNAL_ALLOC_OUTSIDE)
    size = rt.query(ctx, abi.RKNN_QUERY_MEM_SIZE)
    rt.set_internal_mem(ctx, rt.create_mem(ctx, size.total_internal_size))
    return ctx


def outside_weights_freed(rt, model_path):
    """'The runtime copied the weights': the weight mem destroyed after setting it."""
    ctx = rt.init(model_path, abi.RKNN_FLAG_MEM_ALLOC_OUTSIDE)
    size = rt.query(ctx, abi.RKNN_QUERY_MEM_SIZE)
    weights = rt.create_mem(ctx, size.total_weight_size)
    rt.set_weight_mem(ctx, weights)
    rt.destroy_mem(ctx, weights)
    rt.set_internal_mem(ctx, rt.create_mem(ctx, size.total_internal_size))
    return ctx


def outside_one_mem_for_both(rt, model_path):
    """'Share memory to save it': one mem given as the weights and as the internal memory."""
    ctx = rt.init(model_path, abi.RKNN_FLAG_MEM_ALLOC_OUTSIDE)
    size = rt.query(ctx, abi.RKNN_QUERY_MEM_SIZE)
    mem = rt.create_mem(ctx, max(size.total_weight_size, size.total_internal_size))
    rt.set_internal_mem(ctx, mem)
    rt.set_weight_mem(ctx, mem)
    return ctx


def outside_overlapping_views(rt, model_path):
    """One buffer, the internal view 4 KiB after the weights' start: the two overlap."""
    ctx = rt.init(model_path, abi.RKNN_FLAG_MEM_ALLOC_OUTSIDE)
    size = rt.query(ctx, abi.RKNN_QUERY_MEM_SIZE)
    w, i = size.total_weight_size, size.total_internal_size
    big = rt.create_mem(ctx, w + i).contents
    rt.set_weight_mem(ctx, rt.create_mem_from_fd(ctx, big.fd, big.virt_addr, w, 0))
    rt.set_internal_mem(ctx, rt.create_mem_from_fd(ctx, big.fd, big.virt_addr, 4096 + i, 4096))
    return ctx


def outside_fixed_8_mib(rt, model_path):
    """'8 MiB is enough for any model': both mems of one fixed size, RKNN_QUERY_MEM_SIZE never
    asked. It runs right and moves everything outside, yet wastes most of 16 MiB."""
    ctx = rt.init(model_path, abi.RKNN_FLAG_MEM_ALLOC_OUTSIDE)
    rt.set_weight_mem(ctx, rt.create_mem(ctx, 8 << 20))
    rt.set_internal_mem(ctx, rt.create_mem(ctx, 8 << 20))
    return ctx


def outside_weights_oversized(rt, model_path):
    """The internal memory sized right, the weights from the sum of both fields."""
    ctx = rt.init(model_path, abi.RKNN_FLAG_MEM_ALLOC_OUTSIDE)
    size = rt.query(ctx, abi.RKNN_QUERY_MEM_SIZE)
    rt.set_weight_mem(ctx, rt.create_mem(ctx, size.total_weight_size + size.total_internal_size))
    rt.set_internal_mem(ctx, rt.create_mem(ctx, size.total_internal_size))
    return ctx


def outside_rounded_up(rt, model_path):
    """Legitimately different: each size rounded up to a 4 KiB page, as an allocator would."""
    ctx = rt.init(model_path, abi.RKNN_FLAG_MEM_ALLOC_OUTSIDE)
    size = rt.query(ctx, abi.RKNN_QUERY_MEM_SIZE)
    page = lambda n: -(-n // 4096) * 4096    # noqa: E731
    rt.set_weight_mem(ctx, rt.create_mem2(ctx, page(size.total_weight_size), abi.RKNN_FLAG_MEMORY_NON_CACHEABLE))
    rt.set_internal_mem(ctx, rt.create_mem(ctx, page(size.total_internal_size)))
    return ctx


@pytest.mark.parametrize("setup", [outside_reference, outside_one_buffer, outside_rounded_up])
def test_ex1_right_setups_pass(setup) -> None:
    result = checks.check_outside_setup(setup)
    assert result.passed, result


@pytest.mark.parametrize("setup, words", [
    (outside_as_given, ("rknn_run on your context returned -5 RKNN_ERR_PARAM_INVALID", "every part it needs")),
    (outside_weights_sized_as_internal, ("the runtime refused", "the size it expected")),
    (outside_flag_dropped, ("still allocates memory of its own", "RKNN_FLAG_MEM_ALLOC_OUTSIDE")),
    (outside_internal_only, ("still allocates memory of its own", "INTERNAL_ALLOC_OUTSIDE moves the internal")),
    (outside_weights_freed, ("returned -", "Keep every mem alive")),
    (outside_one_mem_for_both, ("outputs differ", "bytes of their own")),
    (outside_overlapping_views, ("outputs differ", "bytes of their own")),
    (outside_fixed_8_mib, ("your weight mem holds 8,192 KiB", "total_weight_size")),
    (outside_weights_oversized, ("your weight mem holds", "never used", "from total_weight_size")),
])
def test_ex1_wrong_setups_fail(setup, words) -> None:
    _failed(checks.check_outside_setup(setup), *words)


def test_ex1_the_check_does_not_name_the_missing_call() -> None:
    """The setup as given fails with the return code only, not the runtime's sentence that
    names rknn_set_weight_mem (decision D6: the student reasons from the rule)."""
    text = _failed(checks.check_outside_setup(outside_as_given), "returned -5")
    assert "set_weight_mem" not in text and "weight" not in text.split("Hint:")[0]


def test_ex1_returns_a_context_it_made() -> None:
    _failed(checks.check_outside_setup(lambda rt, path: 12345), "not a context it made")


def test_ex1_leaves_nothing_behind() -> None:
    """The check destroys the student's mems and contexts, passed or failed."""
    import rknnlab
    made = []

    def recording(rt, path):
        ctx = outside_as_given(rt, path)
        made.append((rt, ctx))
        return ctx

    checks.check_outside_setup(recording)
    assert made and all(not ledger.contexts and not ledger.alive_mems() for ledger, _ in made)
    assert rknnlab.open_runtime() is not None


def test_try_setup_says_what_happens(simulator) -> None:
    import rknnlab
    rt = rknnlab.open_runtime()
    line = checks.try_setup(rt, outside_as_given)
    assert re.search(r"returned -\d+ RKNN_ERR_\w+$", line), line      # the code and its name only
    assert "set_weight_mem" not in line and "weight" not in line           # not the runtime's sentence
    assert checks.try_setup(rt, outside_reference).endswith("yes")


# =========================================================================== exercise 4 (shared internal)
def shared_reference(rt, model_paths):
    ctxs = [rt.init(p, abi.RKNN_FLAG_INTERNAL_ALLOC_OUTSIDE) for p in model_paths]
    sizes = [rt.query(c, abi.RKNN_QUERY_MEM_SIZE).total_internal_size for c in ctxs]
    k = sizes.index(max(sizes))
    big = rt.create_mem(ctxs[k], sizes[k]).contents
    for c, s in zip(ctxs, sizes):
        rt.set_internal_mem(c, rt.create_mem_from_fd(c, big.fd, big.virt_addr, s, 0))
    return ctxs


def shared_demo_steps(rt, model_paths):
    """Legitimately different: the official demo's steps done right (MEM_ALLOC_OUTSIDE,
    weights outside too), the buffer allocated without a context."""
    ctxs = [rt.init(p, abi.RKNN_FLAG_MEM_ALLOC_OUTSIDE) for p in model_paths]
    sizes = [rt.query(c, abi.RKNN_QUERY_MEM_SIZE) for c in ctxs]
    biggest = max(s.total_internal_size for s in sizes)
    big = rt.create_mem2(ctxs[0], biggest, abi.RKNN_FLAG_MEMORY_CACHEABLE).contents
    for c, s in zip(ctxs, sizes):
        rt.set_weight_mem(c, rt.create_mem(c, s.total_weight_size))
        rt.set_internal_mem(c, rt.create_mem_from_fd(c, big.fd, big.virt_addr, s.total_internal_size, 0))
    return ctxs


def shared_one_buffer_each(rt, model_paths):
    """An internal mem per model: nothing shared."""
    ctxs = [rt.init(p, abi.RKNN_FLAG_INTERNAL_ALLOC_OUTSIDE) for p in model_paths]
    for c in ctxs:
        rt.set_internal_mem(c, rt.create_mem(c, rt.query(c, abi.RKNN_QUERY_MEM_SIZE).total_internal_size))
    return ctxs


def shared_regions(rt, model_paths):
    """One buffer of the sum, a region per model: one allocation, no sharing."""
    ctxs = [rt.init(p, abi.RKNN_FLAG_INTERNAL_ALLOC_OUTSIDE) for p in model_paths]
    sizes = [rt.query(c, abi.RKNN_QUERY_MEM_SIZE).total_internal_size for c in ctxs]
    big = rt.create_mem(ctxs[0], sum(sizes)).contents
    at = 0
    for c, s in zip(ctxs, sizes):
        rt.set_internal_mem(c, rt.create_mem_from_fd(c, big.fd, big.virt_addr, at + s, at))
        at += s
    return ctxs


def shared_readme_typo(rt, model_paths):
    """The README's steps: every view sized from the first model."""
    ctxs = [rt.init(p, abi.RKNN_FLAG_INTERNAL_ALLOC_OUTSIDE) for p in model_paths]
    sizes = [rt.query(c, abi.RKNN_QUERY_MEM_SIZE).total_internal_size for c in ctxs]
    big = rt.create_mem(ctxs[0], max(sizes)).contents
    for c in ctxs:
        rt.set_internal_mem(c, rt.create_mem_from_fd(c, big.fd, big.virt_addr, sizes[0], 0))
    return ctxs


def shared_last_models_size(rt, model_paths):
    """The buffer sized from the last model ('the biggest comes last')."""
    ctxs = [rt.init(p, abi.RKNN_FLAG_INTERNAL_ALLOC_OUTSIDE) for p in model_paths]
    sizes = [rt.query(c, abi.RKNN_QUERY_MEM_SIZE).total_internal_size for c in ctxs]
    big = rt.create_mem(ctxs[-1], sizes[-1]).contents
    for c, s in zip(ctxs, sizes):
        rt.set_internal_mem(c, rt.create_mem_from_fd(c, big.fd, big.virt_addr, s, 0))
    return ctxs


def shared_flag_zero(rt, model_paths):
    """Plain contexts: the runtime owns their internal memory."""
    ctxs = [rt.init(p) for p in model_paths]
    sizes = [rt.query(c, abi.RKNN_QUERY_MEM_SIZE).total_internal_size for c in ctxs]
    big = rt.create_mem(ctxs[0], max(sizes)).contents
    for c, s in zip(ctxs, sizes):
        rt.set_internal_mem(c, rt.create_mem_from_fd(c, big.fd, big.virt_addr, s, 0))
    return ctxs


def shared_views_of_the_largest_size(rt, model_paths):
    """Legitimately different (rule §4: a view at least its context's size): every view as
    large as the whole buffer, the buffer made with the last context."""
    ctxs = [rt.init(p, abi.RKNN_FLAG_INTERNAL_ALLOC_OUTSIDE) for p in model_paths]
    biggest = max(rt.query(c, abi.RKNN_QUERY_MEM_SIZE).total_internal_size for c in ctxs)
    big = rt.create_mem(ctxs[-1], biggest).contents
    for c in ctxs:
        rt.set_internal_mem(c, rt.create_mem_from_fd(c, big.fd, big.virt_addr, biggest, 0))
    return ctxs


def _shared_fixed_size(nbytes):
    """A buffer size copied from a printout: one view per context of its own size."""
    def share(rt, model_paths):
        ctxs = [rt.init(p, abi.RKNN_FLAG_INTERNAL_ALLOC_OUTSIDE) for p in model_paths]
        big = rt.create_mem(ctxs[0], nbytes).contents
        for c in ctxs:
            own = rt.query(c, abi.RKNN_QUERY_MEM_SIZE).total_internal_size
            rt.set_internal_mem(c, rt.create_mem_from_fd(c, big.fd, big.virt_addr, min(own, nbytes), 0))
        return ctxs
    return share


shared_notebooks_largest = _shared_fixed_size(1_605_632)     # mobilenet_v2, the largest the lab prints
shared_hard_coded_max = _shared_fixed_size(3_276_800)        # mobilenet_v2_320, printed by chapter 5


def shared_big_mem_itself(rt, model_paths):
    """No views: the mem made with one context given to every context."""
    ctxs = [rt.init(p, abi.RKNN_FLAG_INTERNAL_ALLOC_OUTSIDE) for p in model_paths]
    sizes = [rt.query(c, abi.RKNN_QUERY_MEM_SIZE).total_internal_size for c in ctxs]
    big = rt.create_mem(ctxs[sizes.index(max(sizes))], max(sizes))
    for c in ctxs:
        rt.set_internal_mem(c, big)
    return ctxs


@pytest.mark.parametrize("share", [shared_reference, shared_demo_steps, shared_views_of_the_largest_size])
def test_ex4_right_setups_pass(share, monkeypatch: pytest.MonkeyPatch) -> None:
    for seed in (1, 2):
        _seeded(monkeypatch, seed)
        result = checks.check_shared_internal(share)
        assert result.passed, result


@pytest.mark.parametrize("share, words", [
    (shared_one_buffer_each, ("a saving of", "shares nothing")),
    (shared_regions, ("a saving of", "shares nothing")),
    (shared_readme_typo, ("the runtime refused", "what it needed")),
    (shared_last_models_size, ("the runtime refused", "what it needed")),
    (shared_flag_zero, ("the runtime refused", "what it needed")),
    (shared_notebooks_largest, ()),      # too small a view, or too large a buffer: either call fails
    (shared_hard_coded_max, ()),
    (shared_big_mem_itself, ("the runtime refused", "made with that context")),
])
def test_ex4_wrong_setups_fail(share, words, monkeypatch: pytest.MonkeyPatch) -> None:
    for seed in (1, 2, 3):
        _seeded(monkeypatch, seed)
        _failed(checks.check_shared_internal(share), *words)


def test_ex4_draws_defeat_a_size_copied_from_a_printout() -> None:
    """The largest model comes last, then first; the first call leaves out the largest model
    the notebook prints; each call has a model the notebook does not print; the two calls'
    largest internal sizes differ by more than the check's 64 KiB slack."""
    size = lambda m: checks._internal_size(m, "rk3588")   # noqa: E731
    printed_largest = max(checks.NOTEBOOK_SHARED, key=size)
    rng = np.random.default_rng(0)
    for _ in range(20):
        last, first = checks._shared_orders("rk3588", rng)
        assert size(last[-1]) == max(map(size, last)) > size(last[0])
        assert size(first[0]) == max(map(size, first)) > size(first[-1])
        assert printed_largest not in last
        assert all(set(c) - set(checks.NOTEBOOK_SHARED) for c in (last, first))
        assert abs(size(last[-1]) - size(first[0])) > 64 * 1024


def test_ex4_bad_answers() -> None:
    _failed(checks.check_shared_internal(lambda rt, paths: [rt.init(paths[0])]), "contexts")
    _failed(checks.check_shared_internal(lambda rt, paths: 7), "not a list of contexts")


# =========================================================================== exercise 2 (cacheable)
def cache_reference(pattern, repeats=9):
    buf = np.zeros(pattern.nbytes, dtype=np.uint8)
    pattern.cpu(buf)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        pattern.cpu(buf)
        times.append(time.perf_counter() - t0)
    t = statistics.median(times) * 1e6
    sync = cpu.sync_cost(pattern.nbytes, list(pattern.syncs))["modeled_us"].sum()
    return abi.RKNN_FLAG_MEMORY_CACHEABLE if t + sync <= t * cpu.UNCACHED_SLOWDOWN \
        else abi.RKNN_FLAG_MEMORY_NON_CACHEABLE


def cache_by_minimum(pattern):
    """Legitimately different: the fastest of 15 runs (perf_counter_ns), the sync priced from
    profile.cpu's constants, and the ratio compared instead of the difference."""
    buf = np.ones(pattern.nbytes, dtype=np.uint8)
    best = min(_ns(pattern, buf) for _ in range(15)) / 1e3
    lines = -(-pattern.nbytes // cpu.CACHE_LINE_BYTES)
    passes = sum(2 if s == abi.RKNN_MEMORY_SYNC_BIDIRECTIONAL else 1 for s in pattern.syncs)
    sync = len(pattern.syncs) * cpu.SYNC_FIXED_US + passes * lines * cpu.SYNC_NS_PER_LINE / 1e3
    return abi.RKNN_FLAG_MEMORY_CACHEABLE if (best + sync) / (best * cpu.UNCACHED_SLOWDOWN) < 1 \
        else abi.RKNN_FLAG_MEMORY_NON_CACHEABLE


def _ns(pattern, buf):
    t0 = time.perf_counter_ns()
    pattern.cpu(buf)
    return time.perf_counter_ns() - t0


def cache_always(pattern):
    """'Cacheable is the default and the fastest.'"""
    return abi.RKNN_FLAG_MEMORY_CACHEABLE


def cache_never(pattern):
    """'The RGA FAQ recommends uncached buffers.'"""
    return abi.RKNN_FLAG_MEMORY_NON_CACHEABLE


def cache_by_size(pattern):
    """Large buffers uncached, small ones cached."""
    return abi.RKNN_FLAG_MEMORY_NON_CACHEABLE if pattern.nbytes > 1 << 20 else abi.RKNN_FLAG_MEMORY_CACHEABLE


def cache_from_nbytes(pattern):
    """The CPU time estimated from the buffer's size (as if every frame read all of it) instead
    of timing what the CPU does."""
    t = pattern.nbytes / 10e3          # us at 10 GB/s
    sync = cpu.sync_cost(pattern.nbytes, list(pattern.syncs))["modeled_us"].sum()
    return abi.RKNN_FLAG_MEMORY_CACHEABLE if t + sync <= t * cpu.UNCACHED_SLOWDOWN \
        else abi.RKNN_FLAG_MEMORY_NON_CACHEABLE


def cache_without_slowdown(pattern):
    """The uncached CPU time taken as the cached one: sync against CPU time only."""
    buf = np.zeros(pattern.nbytes, dtype=np.uint8)
    t = min(_ns(pattern, buf) for _ in range(5)) / 1e3
    sync = cpu.sync_cost(pattern.nbytes, list(pattern.syncs))["modeled_us"].sum()
    return abi.RKNN_FLAG_MEMORY_CACHEABLE if sync < t else abi.RKNN_FLAG_MEMORY_NON_CACHEABLE


def cache_by_sync_count(pattern):
    """'Two syncs per frame are too many': the number of syncs decides, not the CPU's work."""
    return abi.RKNN_FLAG_MEMORY_NON_CACHEABLE if len(pattern.syncs) >= 2 else abi.RKNN_FLAG_MEMORY_CACHEABLE


@pytest.mark.parametrize("rule", [cache_reference, cache_by_minimum])
def test_ex2_right_rules_pass(rule, monkeypatch: pytest.MonkeyPatch) -> None:
    for seed in (1, 2, 3):
        _seeded(monkeypatch, seed)
        result = checks.check_cache_choice(rule)
        assert result.passed, result
        assert not result.details and "judged patterns right" in result.message   # one summary line


@pytest.mark.parametrize("rule", [cache_always, cache_never, cache_by_size, cache_from_nbytes,
                                  cache_without_slowdown, cache_by_sync_count])
def test_ex2_wrong_rules_fail(rule, monkeypatch: pytest.MonkeyPatch) -> None:
    for seed in (1, 2, 3):
        _seeded(monkeypatch, seed)
        _failed(checks.check_cache_choice(rule), "the check's costs per frame", "(measured)", "pattern.cpu")


def test_ex2_bad_answers() -> None:
    _failed(checks.check_cache_choice(lambda p: "cacheable"), "not a flag of rknn_create_mem2")
    _failed(checks.check_cache_choice(lambda p: 4), "not a flag of rknn_create_mem2")


def test_ex2_patterns_go_both_ways_and_far_from_the_margin() -> None:
    """Large buffers have patterns of both answers (the size decides nothing), and every
    pattern's two costs differ by far more than the check's margin (a busy machine does not
    move a pattern across it). The fill is sized from this machine's memset speed: a plain
    8 MiB fill at ~115 GB/s had costs 1.3-1.5x apart."""
    rng = np.random.default_rng(0)
    seen, ratios = set(), []
    for _ in range(3):
        for p in cases.made_up_patterns(rng):
            cost = cases.costs_us(p, cases.cached_us(p, repeats=3))
            seen.add((p.nbytes > 1 << 20, min(cost, key=cost.get)))
            ratios.append(max(cost.values()) / min(cost.values()))
    assert {(True, abi.RKNN_FLAG_MEMORY_CACHEABLE), (True, abi.RKNN_FLAG_MEMORY_NON_CACHEABLE),
            (False, abi.RKNN_FLAG_MEMORY_CACHEABLE)} <= seen, seen
    assert min(ratios) > 1.5 * checks.CACHE_MARGIN


def test_ex2_patterns_keep_their_kind_to_themselves() -> None:
    p = checks.practice_pattern()
    assert not p.cpu.__doc__ and p.cpu.__name__ == "cpu" and "_label" not in repr(p)
    assert "B" in repr(p) and "syncs" in repr(p)


# =========================================================================== the truth stays private
def test_no_truth_in_the_namespace() -> None:
    public = {k for k in vars(checks) if not k.startswith("_")}
    assert not {"sram_hits", "sram_part", "made_up_plan", "made_up_patterns", "costs_us", "cached_us",
                "Ledger", "CheckIo"} & public


def test_summary_cannot_be_forged() -> None:
    lh.assert_summary_cannot_be_forged(checks, checks.EX_SRAM, "check_sram_hits")


# =========================================================================== the notebook
def _flat(text: str) -> str:
    return " ".join(text.split())


def test_lab_notebook_structure() -> None:
    nb, text = lh.read_saved_lab(LAB, (
        "**Questions**", "**Objectives**", "## Key points", "## Further reading", "## Your results",
        "**What the API requires:**", "**Evidence:**", "chapter 5 §4", "★", "min)", "examples/c/",
        "**The check**", "**The C it stands for:**", ":class: dropdown", "**Predict**", "(A11)"))
    assert "seed 00" not in text.lower()
    lh.assert_solutions_override_their_stubs(nb)
    headings = [c.source.split("\n")[0] for c in nb.cells if c.source.startswith("## Exercise")]
    assert [h.split()[2] for h in headings] == ["1", "2", "3", "4", "5"], headings
    assert "★" in headings[-1] and not any("★" in h for h in headings[:-1])
    minutes = [int(re.search(r"\((\d+) min\)", h).group(1)) for h in headings]
    assert minutes == sorted(minutes), minutes                  # rising difficulty
    titles = [h.split(": ", 1)[1] for h in headings]
    assert [t.split(" — ", 1)[1] for t in (checks.EX_OUTSIDE, checks.EX_CACHE, checks.EX_SRAM, checks.EX_SHARED,
                                             checks.EX_SHAPES)] == titles
    # exercise 1 names the missing call only below its check cell (the student reasons from the rules first)
    start = next(k for k, c in enumerate(nb.cells) if c.source.startswith("## Exercise 1"))
    check = next(k for k, c in enumerate(nb.cells) if c.source.strip() == "checks.check_outside_setup(setup_outside)")
    assert not any("set_weight_mem" in c.source for c in nb.cells[start:check] if c.cell_type == "markdown")
    assert any("set_weight_mem" in c.source for c in nb.cells[check:check + 2])
    # the cell that runs the broken setup prints no runtime sentence (the student reasons from the rule)
    assert "Wrong claim: the second view" not in text and "mem_size_a.total_internal_size" not in text
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert len(cell.source.splitlines()) <= 25, cell.source[:80]


def test_lab_states_the_chapters_rules_in_its_words() -> None:
    """One rule per concept: the chapter's rules for the lab's five exercises are in the lab's
    rules and its key points, word for word; the objectives have the chapter's verbs."""
    nbformat = pytest.importorskip("nbformat")
    if not CHAPTER.exists():
        pytest.skip("chapter 5 is not written yet")
    chapter = nbformat.read(CHAPTER, as_version=4)
    keys = next(c.source for c in chapter.cells if c.cell_type == "markdown" and c.source.startswith("## Key points"))
    rules = [_flat(item) for item in re.split(r"\n- ", keys.split("\n\n")[1].lstrip("- "))]
    lab = nbformat.read(LAB, as_version=4)
    header = _flat(lab.cells[0].source)
    key_points = _flat(next(c.source for c in lab.cells if c.source.startswith("## Key points")))
    taught = [r for r in rules if any(w in r for w in ("SRAM", "MEM_ALLOC_OUTSIDE", "one internal buffer",
                                                       "Cacheable", "rknn_set_input_shapes"))]
    assert len(taught) == 5, taught
    for rule in taught:
        assert rule in header and rule in key_points, rule
    verbs = re.findall(r"\d\. (?:★ )?\*\*(\w+)\*\*", header)
    assert verbs == ["Find", "Choose", "Compute", "Handle"]
    assert re.findall(r"- \*\*(\w+)\*\*", chapter.cells[0].source) == verbs


test_lab_instructor_edition_passes_every_check, test_lab_student_edition_runs_and_reports_not_done = \
    lh.edition_tests(LAB, n_checks=5)


# =========================================================================== exercise 5 ★ (shape change)
def _current(rt, ctx, shape, query=abi.RKNN_QUERY_CURRENT_INPUT_ATTR, set_shape=True):
    attr = rt.query(ctx, abi.RKNN_QUERY_INPUT_ATTR, abi.rknn_tensor_attr(index=0))
    attr.fmt, attr.n_dims, attr.dims[:4] = abi.RKNN_TENSOR_NHWC, 4, tuple(shape)
    if set_shape:
        rt.set_input_shapes(ctx, [attr])
    ins = rt.query(ctx, query, abi.rknn_tensor_attr(index=0))
    out = rt.query(ctx, abi.RKNN_QUERY_CURRENT_OUTPUT_ATTR if query == abi.RKNN_QUERY_CURRENT_INPUT_ATTR
                   else abi.RKNN_QUERY_OUTPUT_ATTR, abi.rknn_tensor_attr(index=0))
    ins.type, ins.fmt = abi.RKNN_TENSOR_UINT8, abi.RKNN_TENSOR_NHWC
    return ins, out


def _largest(rt, ctx):
    ranges = rt.query(ctx, abi.RKNN_QUERY_INPUT_DYNAMIC_RANGE, abi.rknn_input_range(index=0))
    return max(ranges.shapes(), key=np.prod)


def _zero_copy_frames(rt, ctx, frames, on_change, size_from=None, int8_out=False):
    """The loop every variant shares: ``on_change(shape, mems) -> (mems, out attr)`` at each
    change; the first mems sized at ``size_from`` (a shape) by on_change(size_from, None)."""
    from rknnlab.rknn import buffers
    mems, out = on_change(size_from or _largest(rt, ctx), None)
    outputs, last = [], None
    for frame in frames:
        if frame.shape != last:
            mems, out = on_change(frame.shape, mems)
            last = frame.shape
        buffers.mem_view(mems[0])[:frame.size] = frame.reshape(-1)
        rt.run(ctx)
        if int8_out:
            q = buffers.mem_view(mems[1], np.int8, out.n_elems)
            outputs.append((q.astype(np.float32) - out.zp) * np.float32(out.scale))
        else:
            outputs.append(buffers.mem_view(mems[1], np.float32, out.n_elems).copy())
    return outputs


def _binder(rt, ctx, query=abi.RKNN_QUERY_CURRENT_INPUT_ATTR, set_shape=True, rebind=True, alloc_each=False,
            int8_out=False):
    def on_change(shape, mems):
        ins, out = _current(rt, ctx, shape, query, set_shape)
        if not int8_out:
            out.type = abi.RKNN_TENSOR_FLOAT32
        if mems is None or alloc_each:
            mems = [rt.create_mem(ctx, ins.size_with_stride),
                    rt.create_mem(ctx, out.size_with_stride if int8_out else out.n_elems * 4)]
        elif not rebind:
            return mems, out
        rt.set_io_mem(ctx, mems[0], ins)
        rt.set_io_mem(ctx, mems[1], out)
        return mems, out
    return on_change


def shapes_reference(rt, ctx, frames):
    return _zero_copy_frames(rt, ctx, frames, _binder(rt, ctx))


def shapes_every_frame_int8(rt, ctx, frames):
    """Legitimately different: the shape set and the mems bound again before every frame (a
    change or not), the output bound as int8 and dequantized by hand."""
    from rknnlab.rknn import buffers
    bind = _binder(rt, ctx, int8_out=True)
    mems, out = bind(_largest(rt, ctx), None)
    outputs = []
    for frame in frames:
        mems, out = bind(frame.shape, mems)
        buffers.mem_view(mems[0])[:frame.size] = frame.reshape(-1)
        rt.run(ctx)
        q = buffers.mem_view(mems[1], np.int8, out.n_elems)
        outputs.append((q.astype(np.float32) - out.zp) * np.float32(out.scale))
    return outputs


def shapes_alloc_each_change(rt, ctx, frames):
    """New mems at every shape change (the old ones left to the end)."""
    return _zero_copy_frames(rt, ctx, frames, _binder(rt, ctx, alloc_each=True))


def shapes_no_rebind(rt, ctx, frames):
    """The shape set and the attrs queried, but the mems bound once only."""
    return _zero_copy_frames(rt, ctx, frames, _binder(rt, ctx, rebind=False))


def shapes_sized_from_first_frame(rt, ctx, frames):
    """The mems sized for the first frame's shape, not the largest."""
    return _zero_copy_frames(rt, ctx, frames, _binder(rt, ctx), size_from=frames[0].shape)


def shapes_without_set_input_shapes(rt, ctx, frames):
    """The mems bound again at each change, but the runtime never told the new shape."""
    return _zero_copy_frames(rt, ctx, frames, _binder(rt, ctx, set_shape=False))


def shapes_plain_attr_not_current(rt, ctx, frames):
    """The shape set, but the mems bound with RKNN_QUERY_INPUT_ATTR / OUTPUT_ATTR (the model's
    attrs, not the current shape's)."""
    return _zero_copy_frames(rt, ctx, frames, _binder(rt, ctx, query=abi.RKNN_QUERY_INPUT_ATTR))


def shapes_views_not_copies(rt, ctx, frames):
    """The outputs returned as views of the output mem (no .copy()): every one shows the last run."""
    from rknnlab.rknn import buffers
    bind = _binder(rt, ctx)
    mems, out = bind(_largest(rt, ctx), None)
    outputs, last = [], None
    for frame in frames:
        if frame.shape != last:
            mems, out = bind(frame.shape, mems)
            last = frame.shape
        buffers.mem_view(mems[0])[:frame.size] = frame.reshape(-1)
        rt.run(ctx)
        outputs.append(buffers.mem_view(mems[1], np.float32, out.n_elems))
    return outputs


def shapes_output_sized_from_attr_size(rt, ctx, frames):
    """The FLOAT32 output mem sized from the plain attr's size (the int8 bytes), not n_elems x 4."""
    def on_change(shape, mems):
        ins, out = _current(rt, ctx, shape)
        out.type = abi.RKNN_TENSOR_FLOAT32
        if mems is None:
            mems = [rt.create_mem(ctx, ins.size_with_stride), rt.create_mem(ctx, out.size)]
        rt.set_io_mem(ctx, mems[0], ins)
        rt.set_io_mem(ctx, mems[1], out)
        return mems, out
    return _zero_copy_frames(rt, ctx, frames, on_change)


def shapes_general_api(rt, ctx, frames):
    """rknn_inputs_set / rknn_outputs_get: right values, but no zero-copy mems at all."""
    from rknnlab.experiment.variants import frame_input
    from rknnlab.rknn import buffers
    outputs, last = [], None
    for frame in frames:
        if frame.shape != last:
            _current(rt, ctx, frame.shape)
            last = frame.shape
        rt.inputs_set(ctx, frame_input(frame))
        rt.run(ctx)
        outs = [abi.rknn_output(index=0, want_float=1)]
        rt.outputs_get(ctx, outs)
        outputs.append(buffers.output_view(outs[0], np.float32).copy())
        rt.outputs_release(ctx, outs)
    return outputs


@pytest.mark.parametrize("rule", [shapes_reference, shapes_every_frame_int8])
def test_ex5_right_rules_pass(rule, monkeypatch: pytest.MonkeyPatch) -> None:
    for seed in (1, 2):
        _seeded(monkeypatch, seed)
        result = checks.check_shape_change(rule)
        assert result.passed, result


@pytest.mark.parametrize("rule, words", [
    (shapes_alloc_each_change, ("mem(s) after its first rknn_run", "allocation per shape change")),
    (shapes_no_rebind, ("the runtime refused", "rknn_set_io_mem again")),
    (shapes_sized_from_first_frame, ("the runtime refused", "largest shape")),
    (shapes_without_set_input_shapes, ("differ", "CURRENT_*")),
    (shapes_plain_attr_not_current, ("differ", "CURRENT_*")),
    (shapes_general_api, ("no input mem was bound", "zero-copy")),
    (shapes_views_not_copies, ("differ", "must own its values")),
    (shapes_output_sized_from_attr_size, ("the runtime refused", "n_elems × 4 bytes")),
])
def test_ex5_wrong_rules_fail(rule, words, monkeypatch: pytest.MonkeyPatch) -> None:
    _seeded(monkeypatch, 1)
    _failed(checks.check_shape_change(rule), *words)


def test_ex5_sequences_hold_every_trap() -> None:
    sizes = [(160, 160), (224, 224), (320, 320)]
    rng = np.random.default_rng(0)
    for _ in range(20):
        seq = checks._shape_sequence(sizes, rng)
        changes = sum(a != b for a, b in zip(seq, seq[1:]))
        assert seq[0] != (320, 320) and 5 <= changes < len(seq) - 1
        assert all(seq.count(s) >= 2 for s in sizes)


@pytest.mark.parametrize("check, answer", [(checks.check_shape_change, shapes_reference),
                                           (checks.check_outside_setup, outside_reference),
                                           (checks.check_shared_internal, shared_reference)])
def test_a_soc_without_the_models_says_so(check, answer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RKNNLAB_SIM_SOC", "rk3568")
    _failed(check(answer), "built for RK3588 only", "RKNNLAB_BACKEND=sim")


@pytest.mark.parametrize("check, answer", [(checks.check_sram_hits, sram_reference),
                                           (checks.check_cache_choice, cache_reference)])
def test_exercises_1_and_4_run_on_any_soc(check, answer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RKNNLAB_SIM_SOC", "rk3568")
    assert check(answer).passed


# =========================================================================== board paths
def test_ex3_a_board_gets_the_rule_and_the_simulator_agrees_with_it() -> None:
    """Without the simulator's table (a board), the shipped plans' truth is the rule; on the
    simulator it is measured, and both give the same cases for the same seed."""
    import rknnlab
    rt = rknnlab.open_runtime()
    measured = checks._sram_cases(np.random.default_rng(9), rt)
    ruled = checks._sram_cases(np.random.default_rng(9), None)
    assert [(n, f, t) for n, _, _, f, t in measured] == [(n, f, t) for n, _, _, f, t in ruled]


def test_the_dma_comparisons_measure_whether_user_mems_count(monkeypatch: pytest.MonkeyPatch) -> None:
    """The simulator counts a caller's create_mem in the context's DMA total (A9); where a
    runtime does not, exercise 3 still adds every mem the function allocated."""
    import rknnlab
    assert cases.counts_user_mems(rknnlab.open_runtime())
    monkeypatch.setattr(cases, "counts_user_mems", lambda rt: False)
    real = cases.dma_total

    def without_user_mems(rt, ctx):   # a runtime that leaves the caller's mems out of its total
        return real(rt, ctx) - sum(size for c, how, size, _ in _LEDGERS[-1].alive_mems(ctx)
                                   if how in ("create_mem", "create_mem2"))

    _LEDGERS = []
    real_init = cases.Ledger.__init__

    def init(self, rt):
        real_init(self, rt)
        _LEDGERS.append(self)

    monkeypatch.setattr(cases.Ledger, "__init__", init)
    monkeypatch.setattr(cases, "dma_total", without_user_mems)
    _seeded(monkeypatch, 1)
    assert checks.check_shared_internal(shared_reference).passed
    _failed(checks.check_shared_internal(shared_one_buffer_each), "a saving of")


def test_ex5_a_function_that_destroys_the_context_is_still_judged(monkeypatch: pytest.MonkeyPatch) -> None:
    def destroys(rt, ctx, frames):
        out = shapes_reference(rt, ctx, frames)
        rt.destroy(ctx)
        return out
    _seeded(monkeypatch, 1)
    assert checks.check_shape_change(destroys).passed
