"""What Lab 7's exercises 5 to 7 hand to the student, with the truth kept here (import it from
nowhere in a notebook).

- exercise 5: the cases (three models, a run pattern, the budget's slack), and the least DMA
  memory a pattern allows (one internal buffer per thread, the largest of the thread's);
- exercise 6: situations of ENABLE_SRAM and flag-0 contexts (some SRAM held by a
  TRY_ALLOC_SRAM mem first), and the placement rule the simulator follows;
- exercise 7: measurement tables no notebook prints, built from the simulator's timing law
  (rknnlab.sim.modeled_run_ms, never a hard-coded speed-up) with noise, and the judge: the
  masks whose median cannot be told apart from the fastest one's.
"""
from __future__ import annotations

from typing import Any, Dict, List, Sequence, Set, Tuple

import numpy as np

from ..rknn import abi

# =========================================================================== exercise 5: budget
#: the models a budget case draws from (internal 0.8 to 4.3 MiB; RK3588 builds)
BUDGET_MODELS = ("mobilenet_v2_160", "mobilenet_v2", "mobilenet_v2_320", "yolov5s_320", "yolov5s_480",
                 "resnet50", "yolov5n")
#: the two patterns: every model in turn in one thread, or two threads at the same time
IN_TURN = "in turn"
PAIR = "two at once"
#: the budget's slack above the least DMA memory the pattern allows: at most this, and less than
#: half of what the least wasteful wrong choice costs
MAX_SLACK = 48 * 1024
#: the largest shared buffers of the two cases differ by more than this (no size copied from one
#: case serves the other)
SIZE_GAP = 128 * 1024


def least_internal(internals: Sequence[int], pattern: Sequence[Sequence[int]]) -> int:
    """The internal bytes a pattern needs at least: per thread, its largest total_internal_size
    (models in one thread run in turn and may share; threads run at the same time and may not)."""
    return sum(max(internals[i] for i in thread) for thread in pattern)


def waste_floor(internals: Sequence[int], pattern: Sequence[Sequence[int]]) -> int:
    """The least a strategy that shares less than it may wastes: the smallest internal size of a
    model that has a partner in its thread."""
    return min(internals[i] for thread in pattern if len(thread) > 1 for i in thread)


def budget_cases(rng: np.random.Generator, internal_of: Dict[str, int]) -> List[Tuple[str, List[str],
                                                                                   List[List[int]], int]]:
    """Two cases, (pattern name, three models, pattern, slack in bytes): all in turn, and two at
    once.  In each, the thread that shares does not start with its largest model (a buffer sized
    from the first model is too small), and the two shared buffers differ by more than SIZE_GAP."""
    pool = [m for m in BUDGET_MODELS if m in internal_of]
    while True:
        cases = []
        for name in (IN_TURN, PAIR):
            while True:
                three = [pool[int(i)] for i in rng.permutation(len(pool))[:3]]
                sizes = [internal_of[m] for m in three]
                if len(set(sizes)) == 3:
                    break
            if name == IN_TURN:
                pattern = [[0, 1, 2]]
                if sizes.index(max(sizes)) == 0:
                    three[0], three[2] = three[2], three[0]
            else:
                alone = int(rng.integers(0, 3))
                pair = [k for k in range(3) if k != alone]
                if internal_of[three[pair[0]]] > internal_of[three[pair[1]]]:
                    pair.reverse()
                pattern = [pair, [alone]]
                if rng.random() < 0.5:
                    pattern.reverse()
            internals = [internal_of[m] for m in three]
            slack = min(MAX_SLACK, waste_floor(internals, pattern) // 2)
            slack = int(rng.integers(slack // 2 // 4096, slack // 4096 + 1)) * 4096
            cases.append((name, three, pattern, slack))
        shared = [max(internal_of[cases[k][1][i]] for t in cases[k][2] if len(t) > 1 for i in t) for k in (0, 1)]
        if abs(shared[0] - shared[1]) > SIZE_GAP:
            return cases


# =========================================================================== exercise 6: SRAM
#: one bit of the driver's SRAM bitmap
SRAM_PAGE = 4096


def sram_taken(total_internal: int, flag: int, free_sram: int) -> int:
    """The SRAM a context takes at rknn_init: none without RKNN_FLAG_ENABLE_SRAM; with it, the
    start of its internal buffer in whole 4 KiB pages, as many as are free and no more than
    the buffer needs (the simulator's rule, A-listed; a board shows its own with
    RKNN_QUERY_MEM_SIZE or the driver's bitmap)."""
    if not flag & abi.RKNN_FLAG_ENABLE_SRAM:
        return 0
    return min(free_sram // SRAM_PAGE, -(-int(total_internal) // SRAM_PAGE)) * SRAM_PAGE


def sram_rule(free_sram: int, contexts: Sequence[Tuple[int, int]]) -> List[int]:
    """The SRAM each context of ``contexts`` ((flag, total_internal_size), made in turn) takes."""
    out = []
    for flag, internal in contexts:
        taken = sram_taken(internal, flag, free_sram)
        free_sram -= taken
        out.append(taken)
    return out


#: exercise 6: models of each size class (internal buffer smaller or larger than the SRAM)
SRAM_SMALL = ("digits_cnn", "mobilenet_v2_160")
SRAM_LARGE = ("mobilenet_v2", "mobilenet_v2_320", "resnet50", "yolov5n", "yolov5s_320")


def sram_situations(rng: np.random.Generator, available: Set[str]) -> List[Tuple[int, List[Tuple[str, int]]]]:
    """Four situations, (SRAM pages held by another mem first, [(model, flag), ...] made in
    turn), new at every call: a flag-0 context with a large plan before two ENABLE_SRAM ones; a
    small plan first (the second gets the rest); a large plan first (the second gets nothing);
    and one where part of the SRAM is held so that even the first gets less than its plan."""
    small = [m for m in SRAM_SMALL if m in available]   # digits_cnn: a plan of 4,224 B, not whole pages
    large = [m for m in SRAM_LARGE if m in available]
    pick = lambda names: names[int(rng.integers(len(names)))]   # noqa: E731
    on = abi.RKNN_FLAG_ENABLE_SRAM
    situations = [
        (int(rng.integers(0, 40)), [(pick(large), 0), ("digits_cnn", on), (pick(large), on)]),
        (int(rng.integers(0, 30)), [(small[-1], on), (pick(large), on), (pick(small), 0)]),
        (int(rng.integers(0, 30)), [(pick(large), on), (pick(small), on), (pick(large), 0)]),
        (int(rng.integers(60, 200)), [(pick(large), 0), (pick(large), on), (pick(small), on)]),
    ]
    order = rng.permutation(len(situations))
    return [situations[int(i)] for i in order]


# =========================================================================== exercise 7: core masks
MASKS = (abi.RKNN_NPU_CORE_0, abi.RKNN_NPU_CORE_0_1, abi.RKNN_NPU_CORE_0_1_2)
COLUMNS = ("model", "mask", "run", "ms")


def _law(soc: str) -> Dict[str, Dict[int, float]]:
    """{model: {mask: modeled ms}} for every course model built for ``soc``, from the timing law."""
    from .. import models
    from ..sim import modeled_run_ms
    out = {}
    for name in models.list_models():
        if soc in models.model_socs(name) and not name.endswith("_dynamic"):
            out[name] = {m: modeled_run_ms(name, soc, m) for m in MASKS}
    return out


def _margin(times: Dict[int, float]) -> Tuple[int, float]:
    """(the fastest mask, how much slower the next one is, as a fraction)."""
    order = sorted(times, key=times.get)
    return order[0], times[order[1]] / times[order[0]] - 1


def made_up_tables(rng: np.random.Generator, soc: str = "rk3588") -> List[Tuple[str, Any]]:
    """Measurement tables no notebook prints, (kind, table) with one row per run (model, mask
    name, run, ms), each model a real model's timing-law times scaled by a random factor and
    named "net-<n>", with noise:

    - "clear": per fastest mask the law has (one core, or several), the model where it wins by
      most, with noise far below the margin;
    - "tie": the model whose masks the law sets closest, with noise above the margin (the
      same draws for every mask, shuffled);
    - "slow run": a clear model where one run of the fastest mask took three times as long (a
      busy machine): the median stays, the mean moves;
    - "lucky run": a clear model where the first and the last run of each slower mask were
      faster than every run of the fastest mask (a warm cache): their medians stay slower; the
      single fastest run, the first run and the last run lie."""
    import pandas as pd
    law = _law(soc)
    by_best: Dict[int, Tuple[str, float]] = {}
    for name, times in law.items():
        best, margin = _margin(times)
        if margin > by_best.get(best, ("", 0.0))[1]:
            by_best[best] = (name, margin)
    closest = min(law, key=lambda n: _margin(law[n])[1])
    picks = [("clear", name, margin) for name, margin in by_best.values() if margin >= 0.01]
    picks.append(("tie", closest, _margin(law[closest])[1]))
    strongest = max(picks, key=lambda p: p[2])
    picks.append(("slow run", strongest[1], strongest[2]))
    picks.append(("lucky run", strongest[1], strongest[2]))
    tables = []
    labels = rng.permutation(90)[:len(picks)] + 10
    for (kind, name, margin), label in zip(picks, labels):
        runs = int(rng.integers(12, 21))
        scale = float(rng.uniform(0.5, 2.0))
        sigma = max(margin, 0.002) / 10 if kind != "tie" else max(3 * margin, 0.01)
        rows = []
        # a tie: every mask gets the same noise draws, shuffled, so its medians keep the law's
        # ratios (the closest pair within the judge's reach) whatever the draws
        shared = np.exp(rng.normal(0, sigma, runs))
        for mask in MASKS:
            noise = rng.permutation(shared) if kind == "tie" else np.exp(rng.normal(0, sigma, runs))
            values = law[name][mask] * scale * noise
            if kind == "slow run" and mask == _margin(law[name])[0]:
                values[int(rng.integers(runs))] *= 1.5 + 2 * margin * runs
            if kind == "lucky run" and mask != _margin(law[name])[0]:
                # in the first and the last run: a choice from any one run picks a slower mask
                fastest = law[name][_margin(law[name])[0]] * scale
                values[[0, runs - 1]] = fastest * rng.uniform(0.6, 0.8, 2)
            rows += [{"model": f"net-{label}", "mask": abi.CORE_MASK_NAMES[mask], "run": k + 1,
                      "ms": round(float(v), 4)} for k, v in enumerate(values)]
        order = rng.permutation(len(rows))
        tables.append((kind, pd.DataFrame([rows[int(i)] for i in order], columns=list(COLUMNS))))
    return [tables[int(i)] for i in rng.permutation(len(tables))]   # no kind keeps its place


def judge(table: Any, seed: int = 0) -> Dict[str, Dict[str, Any]]:
    """{model: {"medians": {mask name: ms}, "best": mask name, "accepted": {mask names},
    "intervals": {mask name: (ratio, low, high)}}}: a mask is accepted when its median cannot
    be told apart from the fastest mask's (the 95% bootstrap interval of the ratio of medians
    holds 1) or differs from it by less than rknnlab.profile.cores.MIN_CHANGE."""
    from ..profile._common import ratio_interval
    from ..profile.cores import MIN_CHANGE
    out: Dict[str, Dict[str, Any]] = {}
    for model, rows in table.groupby("model"):
        series = {mask: np.asarray(g["ms"], float) for mask, g in rows.groupby("mask")}
        medians = {m: float(np.median(v)) for m, v in series.items()}
        best = min(medians, key=medians.get)
        accepted, intervals = {best}, {}
        for mask, values in series.items():
            if mask == best:
                continue
            r = ratio_interval(values, series[best], seed=seed)
            intervals[mask] = (r["ratio"], r["low"], r["high"])
            if r["low"] <= 1 <= r["high"] or abs(r["ratio"] - 1) < MIN_CHANGE:
                accepted.add(mask)
        out[str(model)] = {"medians": medians, "best": best, "accepted": accepted, "intervals": intervals}
    return out
