"""rknnlab.checks.lab07, exercises 5 to 7 (rknnlab.checks._lab07_strategy), on the simulator.

Every exercise: the reference solution and a legitimately different one pass; at least three
planted wrong answers fail, each with a message that names the problem, measured numbers and a
hint, never the answer; the untouched stub gives "not done".  The three checks together run in
seconds.
"""
from __future__ import annotations

import math
import re
import time

import numpy as np
import pytest

pytest.importorskip("pandas")

import labhelpers as lh  # noqa: E402
from rknnlab.checks import _lab07_strategy as strategy  # noqa: E402
from rknnlab.checks import _lab07_strategy_cases as cases  # noqa: E402
from rknnlab.checks import lab07 as checks  # noqa: E402
from rknnlab.rknn import abi  # noqa: E402

pytestmark = pytest.mark.usefixtures("simulator")

_failed = lh.assert_failed_with_hint
MY_CHECKS = [checks.check_budget, checks.check_sram, checks.check_core_masks]
ON = abi.RKNN_FLAG_ENABLE_SRAM
PAGE = 4096


def _seeded(monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    monkeypatch.setattr(strategy, "_fresh_seed", lambda: seed)


@pytest.mark.parametrize("check", MY_CHECKS)
def test_checks_never_raise_on_nothing(check) -> None:
    result = check(None)
    assert isinstance(result, checks.CheckResult)
    assert result.status == "not done" and not result.passed and result.hint


@pytest.mark.parametrize("check", MY_CHECKS)
def test_stubs_are_not_done(check) -> None:
    result = check(lh.stub)
    assert result.status == "not done", result
    assert "Traceback" not in repr(result)


@pytest.mark.parametrize("check, name", list(zip(MY_CHECKS, ("setup", "sram_plan", "choose_mask"))))
def test_not_done_names_the_function_only(check, name) -> None:
    """The hidden cases stay hidden: "setup(…) still raises ...", no models, sizes or tables."""
    for student in (lh.stub, lambda *args: None):
        text = repr(check(student))
        assert f"{name}(…)" in text, text
        assert not re.search(r"\d{4,}|<|net-|mobilenet|resnet|yolo|KiB", text), text


def test_the_truth_stays_out_of_the_notebooks_namespace() -> None:
    names = set(dir(checks))
    for private in ("sram_rule", "sram_taken", "judge", "made_up_tables", "budget_cases", "least_internal"):
        assert private not in names
    assert {"check_budget", "check_sram", "check_core_masks"} <= set(checks.__all__)


def test_rules_are_chapter_7s_words() -> None:
    assert checks.RULE_MAX_ONCE == ("Allocating the largest size once is right for one context whose input shape "
                                    "changes. Contexts that run at the same time need their own internal memory.")
    assert checks.RULE_SRAM.startswith("The runtime puts nothing in SRAM unless you ask: RKNN_FLAG_ENABLE_SRAM")
    for rule in (checks.RULE_MAX_ONCE, checks.RULE_SRAM):
        assert all(len(s.split()) <= 30 for s in re.split(r"(?<=\.) ", rule))


# =========================================================================== exercise 5: budget
def _views(rt, ctxs, sizes, groups, offsets=None):
    """One buffer per group of model indices, of the group's largest size; a view per context."""
    for group in groups:
        big_i = max(group, key=lambda i: sizes[i])
        big = rt.create_mem(ctxs[big_i], sizes[big_i])
        for i in group:
            rt.set_internal_mem(ctxs[i], rt.create_mem_from_fd(ctxs[i], big.contents.fd, big.contents.virt_addr,
                                                               sizes[i], 0))


def _outside(rt, model_paths, flag=abi.RKNN_FLAG_INTERNAL_ALLOC_OUTSIDE):
    ctxs = [rt.init(p, flag) for p in model_paths]
    return ctxs, [rt.query(c, abi.RKNN_QUERY_MEM_SIZE).total_internal_size for c in ctxs]


def budget_reference(rt, model_paths, pattern, budget):
    ctxs, sizes = _outside(rt, model_paths)
    _views(rt, ctxs, sizes, pattern)          # one buffer per thread
    return ctxs


def budget_regions_of_one_buffer(rt, model_paths, pattern, budget):
    """Legitimate: one mem with a region per thread, made with the last context."""
    ctxs, sizes = _outside(rt, model_paths)
    regions = [max(sizes[i] for i in t) for t in pattern]
    big = rt.create_mem(ctxs[-1], sum(regions))
    offset = 0
    for t, region in zip(pattern, regions):
        for i in t:    # a view's size counts from the start of the fd (A8)
            view = rt.create_mem_from_fd(ctxs[i], big.contents.fd, big.contents.virt_addr, offset + sizes[i], offset)
            rt.set_internal_mem(ctxs[i], view)
        offset += region
    return ctxs


def budget_separate_when_it_fits(rt, model_paths, pattern, budget):
    """Legitimate: try separate contexts; share only when they do not fit."""
    ctxs = [rt.init(p) for p in model_paths]
    total = sum(rt.query(c, abi.RKNN_QUERY_MEM_SIZE).total_dma_allocated_size for c in ctxs)
    if total <= budget:
        return ctxs
    for c in ctxs:
        rt.destroy(c)
    return budget_reference(rt, model_paths, pattern, budget)


def budget_share_everything(rt, model_paths, pattern, budget):
    ctxs, sizes = _outside(rt, model_paths)
    _views(rt, ctxs, sizes, [[0, 1, 2]])      # the parallel pair too
    return ctxs


def budget_share_nothing(rt, model_paths, pattern, budget):
    return [rt.init(p) for p in model_paths]


def budget_sized_from_first(rt, model_paths, pattern, budget):
    ctxs, sizes = _outside(rt, model_paths)
    for t in pattern:
        big = rt.create_mem(ctxs[t[0]], sizes[t[0]])
        for i in t:
            rt.set_internal_mem(ctxs[i], rt.create_mem_from_fd(ctxs[i], big.contents.fd, big.contents.virt_addr,
                                                               sizes[i], 0))
    return ctxs


def budget_hard_coded(rt, model_paths, pattern, budget):
    ctxs, sizes = _outside(rt, model_paths)
    for t in pattern:
        big = rt.create_mem(ctxs[t[0]], 4 * 2 ** 20)      # "4 MiB is enough for any of them"
        for i in t:
            rt.set_internal_mem(ctxs[i], rt.create_mem_from_fd(ctxs[i], big.contents.fd, big.contents.virt_addr,
                                                               sizes[i], 0))
    return ctxs


def budget_own_buffer_each(rt, model_paths, pattern, budget):
    """Outside allocation, but one buffer per model: shares nothing."""
    ctxs, sizes = _outside(rt, model_paths)
    _views(rt, ctxs, sizes, [[0], [1], [2]])
    return ctxs


def budget_shares_first_two_only(rt, model_paths, pattern, budget):
    ctxs, sizes = _outside(rt, model_paths)
    groups = [t[:2] for t in pattern] + [[i] for t in pattern for i in t[2:]]
    _views(rt, ctxs, sizes, groups)
    return ctxs


def _memfd(size):
    """The student's own buffer: a memfd of ``size`` bytes, mapped (fd, address)."""
    import mmap
    import os
    fd = os.memfd_create("student", 0)
    os.ftruncate(fd, size)
    mapped = mmap.mmap(fd, size)
    _KEEP.append(mapped)
    import ctypes
    return fd, ctypes.addressof(ctypes.c_char.from_buffer(mapped))


_KEEP: list = []   # the mappings stay alive while the check runs


def budget_own_memfd_per_thread(rt, model_paths, pattern, budget):
    """Legitimate: one memfd of the student's own per thread, a view per context."""
    ctxs, sizes = _outside(rt, model_paths)
    for t in pattern:
        fd, virt = _memfd(max(sizes[i] for i in t))
        for i in t:
            rt.set_internal_mem(ctxs[i], rt.create_mem_from_fd(ctxs[i], fd, virt, sizes[i], 0))
    return ctxs


def budget_no_context_per_thread(rt, model_paths, pattern, budget):
    """Legitimate: one RKNN_MEM_FLAG_ALLOC_NO_CONTEXT mem per thread, a view per context."""
    ctxs, sizes = _outside(rt, model_paths)
    for t in pattern:
        big_i = max(t, key=lambda i: sizes[i])
        big = rt.create_mem2(ctxs[big_i], sizes[big_i], abi.RKNN_MEM_FLAG_ALLOC_NO_CONTEXT)
        for i in t:
            rt.set_internal_mem(ctxs[i], rt.create_mem_from_fd(ctxs[i], big.contents.fd, big.contents.virt_addr,
                                                               sizes[i], 0))
    return ctxs


def budget_no_context_each(rt, model_paths, pattern, budget):
    """The student's attack (review L-3): its own NO_CONTEXT internal buffer per context."""
    ctxs, sizes = _outside(rt, model_paths)
    for c, s in zip(ctxs, sizes):
        rt.set_internal_mem(c, rt.create_mem2(c, s, abi.RKNN_MEM_FLAG_ALLOC_NO_CONTEXT))
    return ctxs


def budget_memfd_each(rt, model_paths, pattern, budget):
    """The student's attack (review L-3): its own memfd per context."""
    ctxs, sizes = _outside(rt, model_paths)
    for c, s in zip(ctxs, sizes):
        fd, virt = _memfd(s)
        rt.set_internal_mem(c, rt.create_mem_from_fd(c, fd, virt, s, 0))
    return ctxs


def budget_memfd_each_closed(rt, model_paths, pattern, budget):
    """The same, with each fd closed once the view is made (nothing left to fstat later)."""
    import os
    ctxs, sizes = _outside(rt, model_paths)
    for c, s in zip(ctxs, sizes):
        fd, virt = _memfd(s)
        rt.set_internal_mem(c, rt.create_mem_from_fd(c, fd, virt, s, 0))
        os.close(fd)
    return ctxs


@pytest.mark.parametrize("setup", [budget_reference, budget_regions_of_one_buffer, budget_separate_when_it_fits,
                                   budget_own_memfd_per_thread, budget_no_context_per_thread])
@pytest.mark.parametrize("seed", [3, 11])
def test_ex5_right_setups_pass(setup, seed, monkeypatch: pytest.MonkeyPatch) -> None:
    _seeded(monkeypatch, seed)
    result = checks.check_budget(setup)
    assert result.passed, result
    assert "within the budget" in repr(result)
    assert "internal memory:" in repr(result) and "counted the buffers behind your mems" in repr(result)


@pytest.mark.parametrize("setup, words", [
    (budget_share_everything, ("Contexts that run at the same time need their own internal memory.",)),
    (budget_share_nothing, ("over the budget", "KiB")),
    (budget_own_buffer_each, ("over the budget",)),
    (budget_sized_from_first, ("the runtime refused", "total_internal_size")),
    (budget_hard_coded, ()),
    (budget_shares_first_two_only, ("over the budget",)),
    (budget_no_context_each, ("over the budget",)),
    (budget_memfd_each, ("over the budget",)),
    (budget_memfd_each_closed, ("over the budget",)),
])
@pytest.mark.parametrize("seed", [3, 11, 29])
def test_ex5_wrong_setups_fail(setup, words, seed, monkeypatch: pytest.MonkeyPatch) -> None:
    _seeded(monkeypatch, seed)
    text = _failed(checks.check_budget(setup), *words)
    assert "budget" in text
    if setup is budget_share_everything:   # wrong outputs while the threads overlapped, or judged from the buffers
        assert ("differ from a flag-0 context's" in text and "overlapped in time" in text
                or "uses the same bytes of one buffer" in text), text


@pytest.mark.parametrize("setup", [budget_own_buffer_each, budget_no_context_each, budget_memfd_each])
def test_ex5_sharing_is_judged_by_itself(setup, monkeypatch: pytest.MonkeyPatch) -> None:
    """With a budget so loose that sharing nothing fits, the buffers behind rknn_set_internal_mem still
    show that a thread's contexts do not share."""
    drawn = cases.budget_cases

    def loose(rng, internal_of):
        return [(name, three, pattern, 64 * 2 ** 20) for name, three, pattern, _ in drawn(rng, internal_of)]

    monkeypatch.setattr(cases, "budget_cases", loose)
    _seeded(monkeypatch, 5)
    _failed(checks.check_budget(setup), "run in turn, but their contexts hold", "internal buffers (not shared)")


def test_ex5_cases_plant_every_trap() -> None:
    from rknnlab import models
    internal_of = {m: models.load_report(m, "rk3588").total_internal_size for m in cases.BUDGET_MODELS}
    for seed in range(30):
        drawn = cases.budget_cases(np.random.default_rng(seed), internal_of)
        assert [c[0] for c in drawn] == [cases.IN_TURN, cases.PAIR]
        shared = []
        for _, models_, pattern, slack in drawn:
            sizes = [internal_of[m] for m in models_]
            sharing = [t for t in pattern if len(t) > 1][0]
            assert sizes[sharing[0]] < max(sizes[i] for i in sharing)     # sizing from the first fails
            assert 0 < slack <= min(cases.MAX_SLACK, cases.waste_floor(sizes, pattern) // 2)
            shared.append(max(sizes[i] for i in sharing))
        assert abs(shared[0] - shared[1]) > cases.SIZE_GAP


def test_ex5_practice_helpers() -> None:
    case = checks.practice_case()
    paths, pattern, budget = case
    assert len(paths) == 3 and pattern == [[0, 2], [1]] and budget > 0
    line = checks.try_budget(budget_reference, case)
    assert "outputs equal to flag-0 contexts': yes" in line and "fits" in line, line
    assert "OVER" in checks.try_budget(budget_share_nothing, case)
    assert "NO" in checks.try_budget(budget_share_everything, case)
    assert "not done yet" in checks.try_budget(lh.stub, case)


# =========================================================================== exercise 6: SRAM
def sram_reference(free_sram, contexts):
    out = []
    for c in contexts:
        pages = 0
        if c["flag"] & abi.RKNN_FLAG_ENABLE_SRAM:
            pages = min(free_sram // PAGE, math.ceil(c["total_internal_size"] / PAGE))
        out.append(pages * PAGE)
        free_sram -= pages * PAGE
    return out


def sram_by_bytes_then_round(free_sram, contexts):
    """Legitimate: in bytes, then up to whole pages, capped by the free pages."""
    out = []
    for c in contexts:
        want = -(-c["total_internal_size"] // PAGE) * PAGE if c["flag"] == abi.RKNN_FLAG_ENABLE_SRAM else 0
        got = min(want, free_sram - free_sram % PAGE)
        free_sram -= got
        out.append(got)
    return out


def sram_automatic(free_sram, contexts):
    """"SRAM is used automatically": every context takes some."""
    return sram_reference(free_sram, [dict(c, flag=ON) for c in contexts])


def sram_all_of_it_first(free_sram, contexts):
    out, first = [], True
    for c in contexts:
        on = bool(c["flag"] & ON)
        out.append(978_944 if on and first else 0)
        first = first and not on
    return out


def sram_whole_free_to_each(free_sram, contexts):
    return [free_sram if c["flag"] & ON else 0 for c in contexts]


def sram_ignores_the_held_part(free_sram, contexts):
    return sram_reference(978_944, contexts)


def sram_not_whole_pages(free_sram, contexts):
    out = []
    for c in contexts:
        got = min(free_sram, c["total_internal_size"]) if c["flag"] & ON else 0
        free_sram -= got
        out.append(got)
    return out


def sram_plan_each_no_sharing(free_sram, contexts):
    """Every ENABLE_SRAM context gets its plan (up to the SRAM), as if nothing were taken before."""
    return [min(free_sram, -(-c["total_internal_size"] // PAGE) * PAGE) if c["flag"] & ON else 0 for c in contexts]


@pytest.mark.parametrize("plan", [sram_reference, sram_by_bytes_then_round])
@pytest.mark.parametrize("seed", [1, 7])
def test_ex6_right_plans_pass(plan, seed, monkeypatch: pytest.MonkeyPatch) -> None:
    _seeded(monkeypatch, seed)
    result = checks.check_sram(plan)
    assert result.passed, result
    assert "simulated RK3588" in repr(result)


@pytest.mark.parametrize("plan, words", [
    (sram_automatic, ("The runtime puts nothing in SRAM unless you ask",)),
    (sram_all_of_it_first, ()),
    (sram_whole_free_to_each, ()),
    (sram_ignores_the_held_part, ()),
    (sram_not_whole_pages, ("whole 4 KiB pages",)),
    (sram_plan_each_no_sharing, ("still free",)),
])
@pytest.mark.parametrize("seed", [1, 7, 19])
def test_ex6_wrong_plans_fail(plan, words, seed, monkeypatch: pytest.MonkeyPatch) -> None:
    _seeded(monkeypatch, seed)
    text = _failed(checks.check_sram(plan), "the measurement differs", *words)
    assert "situation" in text


@pytest.mark.parametrize("bad, shown", [(None, "None"), ("4096", "'4096'"), (4096.5, "4096.5")])
def test_ex6_a_value_that_is_not_a_number_is_named(bad, shown, monkeypatch: pytest.MonkeyPatch) -> None:
    """Review N-3: the message names the bad value and its place, not a count that looks right."""
    def plan(free_sram, contexts):
        out = sram_reference(free_sram, contexts)
        out[1] = bad
        return out

    _seeded(monkeypatch, 3)
    text = _failed(checks.check_sram(plan), f"value 2 of your list is {shown}, not a whole number of bytes")
    assert "values for" not in text


def test_ex6_failures_show_only_the_question_and_your_numbers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every number of a failure is the free SRAM given, an internal size given, or the student's
    own answer: never a measurement."""
    _seeded(monkeypatch, 5)
    from rknnlab import models
    available = {m for m in models.list_models() if "rk3588" in models.model_socs(m)}
    import rknnlab
    rt = rknnlab.open_runtime("sim", soc="rk3588")
    try:
        measured = [strategy._situation(rt, hold, made)
                    for hold, made in cases.sram_situations(np.random.default_rng(5), available)]
    finally:
        rt.close()
    allowed = {3588}                  # RK3588
    for free, contexts, _ in measured:
        allowed |= {free, *(c["total_internal_size"] for c in contexts), *sram_automatic(free, contexts)}
    result = checks.check_sram(sram_automatic)
    shown = {int(n.replace(",", "")) for n in re.findall(r"\d[\d,]{3,}", repr(result))}
    assert shown and shown <= allowed, (shown - allowed, repr(result))


def test_ex6_the_rule_matches_the_simulator() -> None:
    """The private rule and the simulator agree (the check judges by the measurement)."""
    import rknnlab
    from rknnlab import models
    available = {m for m in models.list_models() if "rk3588" in models.model_socs(m)}
    rt = rknnlab.open_runtime("sim", soc="rk3588")
    try:
        for seed in range(3):
            for hold, made in cases.sram_situations(np.random.default_rng(seed), available):
                free, contexts, taken = strategy._situation(rt, hold, made)
                assert taken == cases.sram_rule(free, [(c["flag"], c["total_internal_size"]) for c in contexts])
                assert any(taken) and 0 in taken
    finally:
        rt.close()


def test_try_helpers_never_raise() -> None:
    assert checks.try_sram(lh.stub) == "your sram_plan: not done yet: sram_plan still raises NotImplementedError"
    from rknnlab import models
    example = [{"flag": int(f), "total_internal_size": models.load_report(m, "rk3588").total_internal_size}
               for m, f in checks.SRAM_EXAMPLE]
    assert checks.try_sram(sram_reference) == "your sram_plan: " + repr(sram_reference(978_944, example))
    assert "ZeroDivisionError" in checks.try_sram(lambda free, contexts: 1 / 0)
    table = cases.made_up_tables(np.random.default_rng(0))[0][1]
    assert checks.try_masks(lh.stub, table).endswith("not done yet: choose_mask still raises NotImplementedError")
    assert checks.try_masks(masks_by_median, table) == "your choose_mask: " + repr(masks_by_median(table))


def test_ex6_measure_sram_prints_the_example() -> None:
    text = checks.measure_sram()
    assert text.count("\n") == len(checks.SRAM_EXAMPLE) and "took" in text and "simulated RK3588" in text


# =========================================================================== exercise 7: core masks
def masks_by_median(table):
    med = table.groupby(["model", "mask"])["ms"].median()
    return {m: med[m].idxmin() for m in table["model"].unique()}


def masks_fewest_cores_within_one_percent(table):
    """Legitimate: among masks within 1 % of the fastest median, the one with the fewest cores;
    answers as header values."""
    values = {abi.CORE_MASK_NAMES[v]: v for v in (abi.RKNN_NPU_CORE_0, abi.RKNN_NPU_CORE_0_1,
                                                  abi.RKNN_NPU_CORE_0_1_2)}
    out = {}
    for model, rows in table.groupby("model"):
        med = rows.groupby("mask")["ms"].median()
        near = [m for m in med.index if med[m] <= med.min() * 1.009]
        out[model] = values[min(near, key=lambda m: bin(values[m]).count("1"))]
    return out


def masks_always_three(table):
    return {m: "RKNN_NPU_CORE_0_1_2" for m in table["model"].unique()}


def masks_always_one(table):
    return {m: abi.RKNN_NPU_CORE_0 for m in table["model"].unique()}


def masks_slowest(table):
    med = table.groupby(["model", "mask"])["ms"].median()
    return {m: med[m].idxmax() for m in table["model"].unique()}


def masks_auto(table):
    return {m: abi.RKNN_NPU_CORE_AUTO for m in table["model"].unique()}


def masks_by_fastest_run(table):
    """The student's shortcut (review L-7): the single fastest run, not the medians."""
    best = table.loc[table.groupby("model")["ms"].idxmin()]
    return dict(zip(best["model"], best["mask"]))


def _one_run(table, which):
    runs = table[table["run"] == which(table["run"])]
    best = runs.loc[runs.groupby("model")["ms"].idxmin()]
    return dict(zip(best["model"], best["mask"]))


def masks_by_first_run(table):
    """The student's shortcut (review N-2): the fastest mask of run 1 only."""
    return _one_run(table, lambda runs: runs.min())


def masks_by_last_run(table):
    """The student's shortcut (review N-2): the fastest mask of the last run only."""
    return _one_run(table, lambda runs: runs.max())


def masks_by_mean(table):
    mean = table.groupby(["model", "mask"])["ms"].mean()
    return {m: mean[m].idxmin() for m in table["model"].unique()}


@pytest.mark.parametrize("choose", [masks_by_median, masks_fewest_cores_within_one_percent])
@pytest.mark.parametrize("seed", [2, 13])
def test_ex7_right_choices_pass(choose, seed, monkeypatch: pytest.MonkeyPatch) -> None:
    _seeded(monkeypatch, seed)
    result = checks.check_core_masks(choose)
    assert result.passed, result


@pytest.mark.parametrize("choose, words", [
    (masks_always_three, ("which excludes 1",)),
    (masks_always_one, ("which excludes 1",)),
    (masks_slowest, ("which excludes 1",)),
    (masks_auto, ("RKNN_NPU_CORE_AUTO was not measured",)),
    (masks_by_mean, ("which excludes 1", "one slow run moves a mean")),
    (masks_by_fastest_run, ("which excludes 1", "not single runs")),
])
@pytest.mark.parametrize("seed", [2, 13, 31])
def test_ex7_wrong_choices_fail(choose, words, seed, monkeypatch: pytest.MonkeyPatch) -> None:
    _seeded(monkeypatch, seed)
    text = _failed(checks.check_core_masks(choose), *words)
    assert "ms" in text or choose is masks_auto      # a median beside its interval


@pytest.mark.parametrize("choose", [masks_by_first_run, masks_by_last_run])
@pytest.mark.parametrize("seed", range(10))
def test_ex7_a_choice_from_one_run_fails(choose, seed, monkeypatch: pytest.MonkeyPatch) -> None:
    """Review N-2: ignoring all runs but one (the first, or the last) fails at every call."""
    _seeded(monkeypatch, seed)
    _failed(checks.check_core_masks(choose), "which excludes 1", "not single runs")


def test_ex7_tables_come_from_the_timing_law() -> None:
    """No hard-coded speed-up: each made-up model is a course model's law, scaled; the tie is a
    tie and the clear cases are clear for the judge."""
    for seed in range(12):
        tables = cases.made_up_tables(np.random.default_rng(seed))
        kinds = [k for k, _ in tables]
        assert kinds.count("tie") == 1 and kinds.count("slow run") == 1 and kinds.count("clear") >= 2
        assert kinds.count("lucky run") == 1
        for kind, table in tables:
            verdict = list(cases.judge(table).values())[0]
            assert not set(table["model"]) & {"resnet50", "digits_cnn", "mobilenet_v2", "yolov5s"}
            if kind == "lucky run":     # the single fastest run belongs to a mask the medians reject
                fastest_run = table.loc[table["ms"].idxmin(), "mask"]
                assert fastest_run not in verdict["accepted"], verdict
                for one_run in (masks_by_first_run, masks_by_last_run):
                    assert set(one_run(table).values()).isdisjoint(verdict["accepted"]), (one_run, verdict)
            if kind in ("clear", "slow run", "lucky run"):
                assert len(verdict["accepted"]) == 1, (kind, verdict)
            else:
                assert len(verdict["accepted"]) > 1, (kind, verdict)


def test_ex7_measure_masks_table() -> None:
    table = checks.measure_masks(("digits_cnn",), runs=4)
    assert list(table.columns) == ["model", "mask", "run", "ms"] and len(table) == 12
    assert set(table["mask"]) == {"RKNN_NPU_CORE_0", "RKNN_NPU_CORE_0_1", "RKNN_NPU_CORE_0_1_2"}
    assert "simulated" in table.attrs["source"] or "sim" in table.attrs["source"]


def test_the_three_checks_take_seconds() -> None:
    start = time.perf_counter()
    assert checks.check_budget(budget_reference).passed
    assert checks.check_sram(sram_reference).passed
    assert checks.check_core_masks(masks_by_median).passed
    assert time.perf_counter() - start < 15


# =========================================================================== another SoC
def test_on_a_one_core_soc_without_sram(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a simulated RK3568 (one NPU core, no SRAM, no RK3588 models): exercise 5 says where to run
    it, and exercises 6 and 7 run on the simulated RK3588 and say so."""
    monkeypatch.setenv("RKNNLAB_SIM_SOC", "rk3568")
    assert checks.practice_case() is None
    assert "RK3588 only" in checks.try_budget(budget_reference, None)
    _failed(checks.check_budget(budget_reference), "built for RK3588 only", "RKNNLAB_BACKEND=sim")
    result = checks.check_sram(sram_reference)
    assert result.passed and "simulated RK3588" in repr(result), result
    assert checks.check_core_masks(masks_by_median).passed
    assert "RK3588" in checks.measure_masks(("digits_cnn",), runs=2).attrs["source"]
