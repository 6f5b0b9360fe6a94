"""rknnlab.checks.lab03 (the Lab 3 checks) and the Lab 3 notebook, on the simulator.

Every exercise: the reference solution and a legitimately different one pass; at least
three planted wrong answers (the shortcuts a student finds) fail, each with a message that
names the problem and never the answer; the untouched stub gives "not done".  The paths a
board takes (another SoC's C2, a single-core SoC) run on the simulator playing that SoC.
Then the notebook runs twice: instructor edition (every check PASSED, in under 60 s) and
student edition (solution cells removed: runs to the end, every check NOT PASSED, "not
done yet", with a hint and no traceback).
"""
from __future__ import annotations

import ctypes
import re
import statistics
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pandas")

import labhelpers as lh  # noqa: E402
import rknnlab  # noqa: E402
from rknnlab import profile  # noqa: E402
from rknnlab.checks import _lab03_cases as cases  # noqa: E402
from rknnlab.checks import lab03 as checks  # noqa: E402
from rknnlab.rknn import abi, buffers  # noqa: E402
from rknnlab.sim import SimRuntime  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
LAB = ROOT / "labs" / "lab03_bottlenecks.ipynb"

pytestmark = pytest.mark.usefixtures("simulator")

_stub = lh.stub


_failed = lh.assert_failed_with_hint


def _seeded(monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    monkeypatch.setattr(checks, "_fresh_seed", lambda: seed)


@pytest.mark.parametrize("check", [checks.check_bottleneck, checks.check_read_bytes, checks.check_want_float,
                                   checks.check_ddr_bound, checks.check_speedup])
def test_checks_never_raise_on_nothing(check) -> None:
    result = check(None)
    assert isinstance(result, checks.CheckResult)
    assert result.status == "not done" and not result.passed and result.hint


@pytest.mark.parametrize("check", [checks.check_bottleneck, checks.check_read_bytes, checks.check_want_float,
                                   checks.check_ddr_bound, checks.check_speedup])
def test_stubs_are_not_done(check) -> None:
    result = check(_stub)
    assert result.status == "not done", result
    assert "Traceback" not in repr(result)


# =========================================================================== exercise 1 (bottleneck phase)
def bottleneck_reference(pipeline, frames=12, warmup=2):
    times = {name: [] for name, _ in pipeline}
    for i in range(warmup + frames):
        for name, step in pipeline:
            t0 = time.perf_counter()
            step()
            if i >= warmup:
                times[name].append(time.perf_counter() - t0)
    return max(times, key=lambda n: np.median(times[n]))


def bottleneck_by_minimum(pipeline):
    """Legitimately different: every frame counted, each phase judged by its fastest frame
    (a one-off slow call never sets the minimum), monotonic_ns clock."""
    best = {}
    for _ in range(10):
        for name, step in pipeline:
            t0 = time.monotonic_ns()
            step()
            best[name] = min(best.get(name, float("inf")), time.monotonic_ns() - t0)
    return sorted(best.items(), key=lambda kv: kv[1])[-1][0]


def bottleneck_always_run(pipeline):
    """'The NPU is always the bottleneck.'"""
    return "run"


def bottleneck_one_frame(pipeline):
    """One frame timed: the first, slow call of a lazy set-up wins."""
    t = {}
    for name, step in pipeline:
        t0 = time.perf_counter()
        step()
        t[name] = time.perf_counter() - t0
    return max(t, key=t.get)


def bottleneck_cpu_clock(pipeline):
    """CPU time (process_time): a run that waits for the NPU looks free."""
    times = {name: [] for name, _ in pipeline}
    for _ in range(12):
        for name, step in pipeline:
            t0 = time.process_time()
            step()
            times[name].append(time.process_time() - t0)
    return max(times, key=lambda n: np.median(times[n][2:]))


def bottleneck_cumulative_clock(pipeline):
    """The clock started once per frame: every phase carries the ones before it."""
    times = {name: [] for name, _ in pipeline}
    for _ in range(12):
        t0 = time.perf_counter()
        for name, step in pipeline:
            step()
            times[name].append(time.perf_counter() - t0)
    return max(times, key=lambda n: np.median(times[n][2:]))


@pytest.mark.parametrize("rule", [bottleneck_reference, bottleneck_by_minimum])
def test_ex1_right_rules_pass(rule, monkeypatch: pytest.MonkeyPatch) -> None:
    for seed in (1, 2):
        _seeded(monkeypatch, seed)
        result = checks.check_bottleneck(rule)
        assert result.passed, result


@pytest.mark.parametrize("rule", [bottleneck_always_run, bottleneck_one_frame, bottleneck_cpu_clock,
                                  bottleneck_cumulative_clock])
def test_ex1_wrong_rules_fail(rule, monkeypatch: pytest.MonkeyPatch) -> None:
    _seeded(monkeypatch, 1)
    text = _failed(checks.check_bottleneck(rule), "the check's own timing", "wall time")
    assert "should be" not in text


def test_ex1_a_machine_too_busy_to_tell_is_not_judged(monkeypatch: pytest.MonkeyPatch) -> None:
    """When the check's own timing shows no clear slowest phase, it judges nothing and says
    why: it never passes or fails a student on noise."""
    monkeypatch.setattr(cases, "measure_phases", lambda steps, frames, skip: {n: 1e-3 for n, _ in steps})
    text = _failed(checks.check_bottleneck(bottleneck_always_run), "had a clear slowest phase", "again")
    assert "not judged" in text


def test_ex1_hints_name_the_mistake(monkeypatch: pytest.MonkeyPatch) -> None:
    """One frame names the phase with a slow first call: the hint speaks of the warm-up. A pass
    says a median or leaving out the warm-up kept the slow call out (a median alone may)."""
    _seeded(monkeypatch, 1)
    _failed(checks.check_bottleneck(bottleneck_one_frame), "slow on its first call only", "warm-up")
    result = checks.check_bottleneck(bottleneck_by_minimum)
    assert result.passed and "after the warm-up" not in result.message and "median" in result.message, result


def test_ex1_not_a_phase() -> None:
    _failed(checks.check_bottleneck(lambda p: "the NPU"), "not a phase")


def test_ex1_every_kind_of_bottleneck_in_every_check() -> None:
    for seed in range(30):
        plan = cases.plan_pipelines(np.random.default_rng(seed))
        assert {k[0] for k in plan} == {"run", "preprocess", "postprocess"}
        assert any(k[2] for k in plan)          # a slow first call somewhere


# =========================================================================== exercise 2 (read bytes)
def read_bytes_reference(layer, native_attr):
    c2 = native_attr.dims[4]
    shapes = layer["input_shapes"]
    acts, weights = (shapes[:1], shapes[1:2]) if layer["op"].startswith("Conv") else (shapes, [])
    total = 0
    for s in acts:
        if len(s) == 4:
            n, c, h, w = s
            total += n * (-(-c // c2) * c2) * h * w
        else:
            total += int(np.prod(s))
    return total + sum(int(np.prod(w)) for w in weights)


def read_bytes_alternative(layer, native_attr):
    """Legitimately different: math.ceil, C2 as the last of n_dims dims, numpy arrays."""
    import math
    c2 = int(native_attr.dims[native_attr.n_dims - 1])
    shapes = [np.array(s) for s in layer["input_shapes"]]
    conv = layer["op"].startswith("Conv")
    reads = 0
    for k, s in enumerate(shapes):
        if conv and k == 2:
            continue                                   # the bias
        if conv and k == 1:
            reads += int(s.prod())                     # the weights
        elif s.size == 4:
            reads += int(s[0] * math.ceil(s[1] / c2) * c2 * s[2] * s[3])
        else:
            reads += int(s.prod())
    return float(reads)


def _with_c2(c2):
    class Attr:
        n_dims = 5
        dims = [1, 1, 1, 1, c2]
    return Attr


def read_bytes_assumes_16(layer, native_attr):
    return read_bytes_reference(layer, _with_c2(16))


def read_bytes_no_padding(layer, native_attr):
    return read_bytes_reference(layer, _with_c2(1))


def read_bytes_c2_from_dims1(layer, native_attr):
    """C2 read from the wrong dim (C1)."""
    return read_bytes_reference(layer, _with_c2(native_attr.dims[1]))


def read_bytes_and_writes(layer, native_attr):
    """'read/written': the output counted too."""
    c2 = native_attr.dims[4]
    s = layer["output_shape"]
    out = s[0] * (-(-s[1] // c2) * c2) * s[2] * s[3] if len(s) == 4 else int(np.prod(s))
    return read_bytes_reference(layer, native_attr) + out


def read_bytes_without_weights(layer, native_attr):
    if layer["op"].startswith("Conv"):
        layer = dict(layer, op="Input", input_shapes=layer["input_shapes"][:1])
    return read_bytes_reference(layer, native_attr)


def read_bytes_first_input_only(layer, native_attr):
    if not layer["op"].startswith("Conv"):
        layer = dict(layer, input_shapes=layer["input_shapes"][:1])
    return read_bytes_reference(layer, native_attr)


def read_bytes_float32(layer, native_attr):
    return 4 * read_bytes_reference(layer, native_attr)


def read_bytes_with_channel_extras(layer, native_attr):
    """Also legitimate: the 8 bytes per output channel a Conv's column holds, counted too
    (output channels from the output shape: a depthwise conv's weights are [1, C, kh, kw])."""
    extra = 8 * layer["output_shape"][1] if layer["op"].startswith("Conv") else 0
    return read_bytes_reference(layer, native_attr) + extra


def read_bytes_with_extras_from_the_weights(layer, native_attr):
    """Also within the tolerance: the 8 bytes per channel counted from the weights' dim 0 (a
    depthwise conv then gets 8 B in all, not per channel: a small slip, not a wrong rule)."""
    extra = 8 * layer["input_shapes"][1][0] if layer["op"].startswith("Conv") else 0
    return read_bytes_reference(layer, native_attr) + extra


@pytest.mark.parametrize("rule", [read_bytes_reference, read_bytes_alternative, read_bytes_with_channel_extras])
def test_ex2_right_rules_pass(rule) -> None:
    result = checks.check_read_bytes(rule)
    assert result.passed, result
    assert re.search(r"All \d{3,} layers", result.message)


@pytest.mark.parametrize("rule, where", [
    # the failure lists a few of the layers it got wrong, drawn from every shipped model (ppocr_det's
    # rk3568 layers are Conv*, Add, Mul...): judge the SoC and the op family, not one op name
    (read_bytes_assumes_16, "rk3568 "),
    (read_bytes_no_padding, "rk3588 "),
    (read_bytes_c2_from_dims1, "rk3568"),
    (read_bytes_and_writes, "rk3588"),
    (read_bytes_without_weights, "rk3588"),
    (read_bytes_first_input_only, "Concat"),
    (read_bytes_float32, "rk3588"),
])
def test_ex2_wrong_rules_fail(rule, where) -> None:
    _failed(checks.check_read_bytes(rule), "layers are off by more than 8%", where, "dims[4] of the native attr")


def read_bytes_padded_weights(layer, native_attr):
    """The weights' input channels padded to C2 too (the reports say they are not)."""
    if not layer["op"].startswith("Conv"):
        return read_bytes_reference(layer, native_attr)
    c2, w = native_attr.dims[4], layer["input_shapes"][1]
    return read_bytes_reference(layer, native_attr) - int(np.prod(w)) + w[0] * (-(-w[1] // c2) * c2) * w[2] * w[3]


def _report_lookup():
    """The shortcut: RW(KB) x 1024 read from every shipped report, keyed by C2, op and shapes."""
    from rknnlab import models
    table = {}
    for name in models.list_models():
        for soc in models.model_socs(name):
            c2 = 8 if soc in ("rk3566", "rk3568") else 16
            for x in models.load_report(name, soc).layers:
                table[(c2, x["op"], str(x["input_shapes"]))] = x["rw_kb"] * 1024
    return table


def read_bytes_looked_up(layer, native_attr, _table=_report_lookup()):
    return _table.get((int(native_attr.dims[4]), layer["op"], str(layer["input_shapes"])), 0)


def read_bytes_looked_up_else_rule_ignoring_c2(layer, native_attr, _table=_report_lookup()):
    """The lookup table, with a fallback that assumes C2 = 16 for the layers it does not hold."""
    key = (int(native_attr.dims[4]), layer["op"], str(layer["input_shapes"]))
    return _table.get(key) or read_bytes_reference(layer, _with_c2(16))


def test_ex2_a_table_read_from_the_reports_fails() -> None:
    """The reports hold the answer for every shipped layer; the made-up layers they do not."""
    for rule in (read_bytes_looked_up, read_bytes_looked_up_else_rule_ignoring_c2):
        text = _failed(checks.check_read_bytes(rule), "made-up", "layers are off by more than 8%")
        assert re.search(r"\(([1-9]\d*) of them made-up\)", text), text


@pytest.mark.parametrize("rule, words", [
    (read_bytes_padded_weights, "weights (not padded)"),
    (lambda layer, attr: read_bytes_reference(layer, attr) / 1024, "did you return KB?"),
])
def test_ex2_padded_weights_and_kilobytes_fail(rule, words) -> None:
    _failed(checks.check_read_bytes(rule), "made-up", words)


def test_ex2_made_up_layers_tell_every_reading_apart() -> None:
    """Each call draws new made-up layers; each draw holds layers on which C2 = 8 and C2 = 16,
    no padding and padded weights give answers off by more than the tolerance, while the rule
    with or without the 8 B per output channel is within it."""
    c2s = cases.shipped_c2()
    assert sorted(set(c2s.values())) == [8, 16]
    for seed in range(20):
        drawn = cases.made_up_layers(np.random.default_rng(seed), c2s)
        assert len(drawn) >= 48 and {c["c2"] for c in drawn} == {8, 16}
        shipped = {(x["layer"]["op"], str(x["layer"]["input_shapes"])) for x in cases.judged_layers()}
        assert not any((c["layer"]["op"], str(c["layer"]["input_shapes"])) in shipped for c in drawn)
        for c in drawn:
            assert cases.within(cases.rw_rule(c["layer"], c["c2"]), c["truth"])
            assert cases.within(read_bytes_with_channel_extras(c["layer"], _with_c2(c["c2"])), c["truth"])
        for other in (lambda c: 24 - c["c2"], lambda c: 1):
            telling = [c for c in drawn if not cases.within(cases.rw_rule(c["layer"], other(c)), c["truth"])]
            assert len({c["c2"] for c in telling}) == 2 if other(drawn[0]) != 1 else len(telling) >= 6
            assert len(telling) >= 6
        assert sum(not cases.within(read_bytes_padded_weights(c["layer"], _with_c2(c["c2"])), c["truth"])
                   for c in drawn) >= 6


def test_ex2_a_depthwise_convs_extras_count_its_output_channels() -> None:
    """The truth of a made-up depthwise conv holds 8 B per OUTPUT channel (its weights are
    listed [1, C, 3, 3], so their dim 0 would give 8 B in all); answers with the per-channel
    bytes counted either way, or left out, are within the tolerance."""
    depthwise = 0
    for seed in range(10):
        for c in cases.made_up_layers(np.random.default_rng(seed), cases.shipped_c2()):
            layer = c["layer"]
            if layer["op"].startswith("Conv") and layer["input_shapes"][1][0] == 1:
                depthwise += 1
                assert c["truth"] - cases.rw_rule(layer, c["c2"]) == 8 * layer["output_shape"][1] > 8
            for rule in (read_bytes_reference, read_bytes_with_channel_extras, read_bytes_with_extras_from_the_weights):
                assert cases.within(rule(layer, _with_c2(c["c2"])), c["truth"])
    assert depthwise >= 10


def test_ex2_failures_name_the_layer_as_the_chapter_numbers_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """A shipped layer is named by both numberings: compiler layer N is profile ID N+1 (the
    made-up layers left out here, so the layers shown are shipped ones)."""
    monkeypatch.setattr(cases, "made_up_layers", lambda rng, c2_by_soc: [])
    text = _failed(checks.check_read_bytes(read_bytes_no_padding), "layers are off by more than 8%")
    named = re.findall(r"compiler layer (\d+) \(profile ID (\d+)\)", text)
    assert named and all(int(pid) == int(n) + 1 for n, pid in named), text
    assert not re.search(r", layer \d", text), text


def test_ex2_says_which_expected_bytes_are_inferred() -> None:
    """The made-up layers' padded bytes at C2 = 8, and of an Add or Concat, are inferred from the
    layout (no shipped report shows them): the lab and the docstrings say so."""
    nbformat = pytest.importorskip("nbformat")
    lab = nbformat.read(LAB, as_version=4)
    ex2 = _flat(next(c.source for c in lab.cells if c.source.startswith("## Exercise 2")))
    assert "which the first set confirms" not in ex2
    assert "inferred from the NC1HWC2 layout" in ex2 and "No shipped report confirms them" in ex2
    for doc in (cases.made_up_layers.__doc__, checks.check_read_bytes.__doc__):
        assert "inferred" in _flat(doc) and "24 channels at C2 = 16" in _flat(doc)
    # what the reports confirm: Conv inputs of 24 channels at C2 = 16 in the classifiers, and (only
    # in ppocr_det's reports) Add, Mul and Conv inputs at C2 = 16 and C2 = 8; never a Concat
    padded = {(c["model"], c["c2"], c["layer"]["op"][:4], c["layer"]["input_shapes"][0][1])
              for c in cases.judged_layers() if cases.rw_rule(c["layer"], c["c2"]) != cases.rw_rule(c["layer"], 1)}
    ops = {(c2, op) for _, c2, op, _ in padded}
    assert {(16, "Conv"), (16, "Add"), (16, "Mul"), (8, "Add"), (8, "Conv"), (8, "Mul")} <= ops, ops
    assert not any(op == "Conc" for _, _, op, _ in padded), padded
    assert {m for m, c2, op, ch in padded if (c2, op, ch) != (16, "Conv", 24)} == {"ppocr_det"}, padded
    assert "ppocr_det" in ex2 and "Add, Mul and Conv" in ex2


def test_ex2_an_error_gets_a_generic_hint() -> None:
    def raises(layer, native_attr):
        return layer["no such key"]

    text = _failed(checks.check_read_bytes(raises), "raised KeyError", "try it on the layers the notebook prints")
    assert "input_shapes of a Conv" not in text


def test_ex2_not_a_number() -> None:
    _failed(checks.check_read_bytes(lambda layer, attr: "a lot"), "not a number")


def test_ex2_judges_every_soc_and_the_layers_where_c2_matters() -> None:
    judged = cases.judged_layers()
    assert len(judged) > 900
    assert {c["soc"] for c in judged} >= {"rk3588", "rk3576", "rk3562", "rk3568"}
    assert {c["c2"] for c in judged if c["soc"] == "rk3568"} == {8}
    # layers whose answer depends on C2 (8 against 16), and on padding at all
    assert sum(cases.rw_rule(c["layer"], 16) != cases.rw_rule(c["layer"], 8) for c in judged
               if c["soc"] == "rk3568" and not cases.within(cases.rw_rule(c["layer"], 16), c["truth"])) >= 2
    assert sum(not cases.within(cases.rw_rule(c["layer"], 1), c["truth"]) for c in judged) >= 6
    # the rule holds on nearly every layer whose shapes list what it reads: the check drops under 1%
    from rknnlab import models
    listed = 0
    for name in models.list_models():
        for soc in models.model_socs(name):
            layers = models.load_report(name, soc).layers
            listed += sum(cases._structurally_judged(x, layers[0]["output_shapes"][0]) for x in layers)
    assert len(judged) >= 0.99 * listed
    assert all(c["layer"]["op"] not in ("ConvAdd", "ConvAddRelu", "ConvReluAdd", "OutputOperator")
               for c in judged)


def test_ex2_on_a_rk3568_the_runtime_gives_c2(monkeypatch: pytest.MonkeyPatch) -> None:
    """A board of another SoC: the attr of its own SoC comes from its runtime (here the
    simulator playing rk3568), with C2 = 8."""
    made = []
    monkeypatch.setattr(checks, "_open_runtime", lambda: made.append(SimRuntime("rk3568")) or made[-1])
    seen = []

    def spy(layer, attr):
        seen.append(int(attr.dims[4]))
        return read_bytes_reference(layer, attr)

    result = checks.check_read_bytes(spy)
    assert result.passed, result
    assert "queried with RKNN_QUERY_NATIVE_OUTPUT_ATTR for rk3568" in result.details[0]
    assert set(seen) == {8, 16}
    _failed(checks.check_read_bytes(read_bytes_assumes_16), "rk3568")


# =========================================================================== exercise 3 (DDR-bound layers)
def ddr_bound_reference(text):
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[:1] == ["ID"]) + 2
    ids = []
    for line in lines[start:]:
        if line.startswith("-"):
            break
        cells = line.split()
        ddr, npu, _ = map(int, cells[6].split("/"))
        if ddr > npu:
            ids.append(int(cells[0]))
    return ids


def ddr_bound_by_the_library(text):
    """Legitimately different: rknnlab.profile's parser and a pandas mask, a numpy array out."""
    table = profile.parse_perf_detail(text)
    return table.loc[table["cycles_ddr"] > table["cycles_npu"], "id"].to_numpy()


def _rows(text):
    return list(cases.parse_rows(text))


def ddr_bound_ties_too(text):
    """'At least as many DDR cycles': ties and 0/0 layers counted."""
    return [r["id"] for r in _rows(text) if r["ddr"] >= r["npu"]]


def ddr_bound_columns_swapped(text):
    """Reads Cycles as NPU/DDR/Total."""
    return [r["id"] for r in _rows(text) if r["npu"] > r["ddr"]]


def ddr_bound_compiler_ids(text):
    """The compiler's numbering (from 0) instead of the profile's."""
    return [i - 1 for i in ddr_bound_reference(text)]


def ddr_bound_slowest(text):
    """The slowest third of the layers."""
    rows = sorted(_rows(text), key=lambda r: -r["time_us"])
    return [r["id"] for r in rows[:max(1, len(rows) // 3)]]


def ddr_bound_largest_rw(text):
    """The layers that read the most."""
    rows = sorted(_rows(text), key=lambda r: -r["rw_kb"])
    return [r["id"] for r in rows[:max(1, len(rows) // 3)]]


def ddr_bound_needs_npu_cycles(text):
    """A ratio DDR/NPU > 1, skipping NPU = 0 to avoid dividing by zero."""
    return [r["id"] for r in _rows(text) if r["npu"] and r["ddr"] / r["npu"] > 1]


@pytest.mark.parametrize("rule", [ddr_bound_reference, ddr_bound_by_the_library])
def test_ex3_right_rules_pass(rule, monkeypatch: pytest.MonkeyPatch) -> None:
    for seed in range(10):
        _seeded(monkeypatch, seed)
        result = checks.check_ddr_bound(rule)
        assert result.passed, (seed, result)


@pytest.mark.parametrize("rule, trap", [
    (ddr_bound_ties_too, "DDR and NPU cycles are equal"),
    (ddr_bound_columns_swapped, "more NPU cycles than DDR cycles"),
    (ddr_bound_compiler_ids, "not its DDR-bound layers"),
    (ddr_bound_slowest, "more NPU cycles than DDR cycles"),
    (ddr_bound_largest_rw, "not its DDR-bound layers"),
    (ddr_bound_needs_npu_cycles, "DDR cycles and 0 NPU cycles"),
])
def test_ex3_wrong_rules_fail(rule, trap, monkeypatch: pytest.MonkeyPatch) -> None:
    for seed in range(5):
        _seeded(monkeypatch, seed)
        text = _failed(checks.check_ddr_bound(rule), trap)
        assert not re.search(r"\bid\b.*\d", text.split("Hint:")[0].lower()), text   # no IDs named


def test_ex3_bad_answers() -> None:
    _failed(checks.check_ddr_bound(lambda t: "4, 9"), "strings, not ints")
    _failed(checks.check_ddr_bound(lambda t: [str(i) for i in ddr_bound_reference(t)]), "strings, not ints",
            "int(...)")
    _failed(checks.check_ddr_bound(lambda t: [1.5]), "not a collection")


def test_ex3_ids_shifted_by_one_are_named() -> None:
    _failed(checks.check_ddr_bound(ddr_bound_compiler_ids), "shifted by -1", "numbers layers from 1")
    _failed(checks.check_ddr_bound(lambda t: [i + 1 for i in ddr_bound_reference(t)]), "shifted by +1")


def test_ex3_profiles_are_the_runtime_format_and_hold_every_trap() -> None:
    """The check's texts parse with rknnlab.profile (as a board's and the simulator's do), and
    each check's six hold ties, 0/0 layers and DDR-only layers."""
    for seed in range(5):
        drawn = cases.profile_cases(seed)
        assert len(drawn) == 6
        kinds = set()
        for text, truth in drawn:
            table = profile.parse_perf_detail(text)
            assert set(table.loc[table["cycles_ddr"] > table["cycles_npu"], "id"]) == truth["ddr"]
            assert table["id"].iloc[0] == 1 and table["op"].iloc[0] == "InputOperator"
            kinds |= {k for k in ("tie", "zero", "ddr_only") if truth[k]}
        assert kinds == {"tie", "zero", "ddr_only"}


def test_ex3_the_simulators_own_text_is_judged_the_same() -> None:
    """Both right rules read a text the simulated runtime prints, and agree."""
    rt = rknnlab.open_runtime()
    ctx = rt.init(str(rknnlab.models.model_path("yolov5s", "rk3588")), abi.RKNN_FLAG_COLLECT_PERF_MASK)
    try:
        rt.inputs_set(ctx, _frame(rt, ctx))
        rt.run(ctx)
        text = profile.perf_detail(rt, ctx)
    finally:
        rt.destroy(ctx)
    ids = sorted(ddr_bound_reference(text))
    assert ids and ids == sorted(int(i) for i in ddr_bound_by_the_library(text))


# =========================================================================== exercise 4 (want_float)
def _attrs(rt, ctx):
    n = rt.query(ctx, abi.RKNN_QUERY_IN_OUT_NUM).n_output
    return [rt.query(ctx, abi.RKNN_QUERY_OUTPUT_ATTR, abi.rknn_tensor_attr(index=k)) for k in range(n)]


def want_float_reference(rt, ctx, repeats=7):
    attrs = _attrs(rt, ctx)
    cost = {0: [], 1: []}
    for i in range(repeats + 1):
        for wf in (0, 1):
            outs = [abi.rknn_output(index=a.index, want_float=wf) for a in attrs]
            t0 = time.perf_counter()
            rt.outputs_get(ctx, outs)
            if wf == 0:
                for o, a in zip(outs, attrs):
                    q = np.ctypeslib.as_array((ctypes.c_int8 * o.size).from_address(o.buf))
                    (q.astype(np.float32) - a.zp) * np.float32(a.scale)
            dt = time.perf_counter() - t0
            rt.outputs_release(ctx, outs)
            if i:
                cost[wf].append(dt)
    return min(cost, key=lambda wf: np.median(cost[wf]))


def want_float_preallocated(rt, ctx):
    """Legitimately different: buffers allocated once (is_prealloc = 1), statistics.median,
    the dequantize into a float32 buffer kept across calls, the float way first."""
    attrs = _attrs(rt, ctx)
    floats = [np.empty(a.n_elems, np.float32) for a in attrs]
    ints = [np.empty(a.size, np.int8) for a in attrs]
    deq = [np.empty(a.n_elems, np.float32) for a in attrs]

    def float_way():
        outs = [abi.rknn_output(index=a.index, want_float=1, is_prealloc=1, buf=b.ctypes.data, size=b.nbytes)
                for a, b in zip(attrs, floats)]
        rt.outputs_get(ctx, outs)
        rt.outputs_release(ctx, outs)

    def int8_way():
        outs = [abi.rknn_output(index=a.index, want_float=0, is_prealloc=1, buf=b.ctypes.data, size=b.nbytes)
                for a, b in zip(attrs, ints)]
        rt.outputs_get(ctx, outs)
        rt.outputs_release(ctx, outs)
        for a, q, d in zip(attrs, ints, deq):
            np.subtract(q[:a.n_elems], a.zp, out=d, dtype=np.float32)
            d *= a.scale

    def timed(fn):
        t0 = time.perf_counter()
        fn()
        return time.perf_counter() - t0

    runs = [(timed(float_way), timed(int8_way)) for _ in range(8)][1:]
    return 1 if statistics.median(r[0] for r in runs) <= statistics.median(r[1] for r in runs) else 0


def want_float_always_int8(rt, ctx):
    """'int8 is four times fewer bytes: always cheaper.'"""
    return 0


def want_float_always_float(rt, ctx):
    return 1


def want_float_get_alone(rt, ctx, repeats=7):
    """Times the two gets, forgets the dequantize that the int8 way still needs."""
    attrs = _attrs(rt, ctx)
    cost = {0: [], 1: []}
    for i in range(repeats + 1):
        for wf in (0, 1):
            outs = [abi.rknn_output(index=a.index, want_float=wf) for a in attrs]
            t0 = time.perf_counter()
            rt.outputs_get(ctx, outs)
            dt = time.perf_counter() - t0
            rt.outputs_release(ctx, outs)
            if i:
                cost[wf].append(dt)
    return min(cost, key=lambda wf: np.median(cost[wf]))


def want_float_by_bytes(rt, ctx):
    """Decides from the sizes, measures nothing."""
    attrs = _attrs(rt, ctx)
    return 0 if sum(a.size for a in attrs) < sum(a.n_elems * 4 for a in attrs) else 1


@pytest.mark.parametrize("rule", [want_float_reference, want_float_preallocated])
def test_ex4_right_rules_pass(rule, monkeypatch: pytest.MonkeyPatch) -> None:
    for seed in (1, 2):
        _seeded(monkeypatch, seed)
        result = checks.check_want_float(rule)
        assert result.passed, result
        assert len([d for d in result.details if "— right" in d]) == 3


def want_float_never_released(rt, ctx, repeats=7):
    """Right measurement into buffers allocated once (is_prealloc = 1), but no
    rknn_outputs_release at all: a note, not a failure (Rockchip's code disagrees)."""
    attrs = _attrs(rt, ctx)
    bufs = {wf: [np.empty(a.n_elems * 4 if wf else a.size, np.uint8) for a in attrs] for wf in (0, 1)}
    cost = {0: [], 1: []}
    for i in range(repeats + 1):
        for wf in (0, 1):
            outs = [abi.rknn_output(index=a.index, want_float=wf, is_prealloc=1, buf=b.ctypes.data, size=b.nbytes)
                    for a, b in zip(attrs, bufs[wf])]
            t0 = time.perf_counter()
            rt.outputs_get(ctx, outs)
            if wf == 0:
                for o, a in zip(outs, attrs):
                    (buffers.output_view(o, np.int8).astype(np.float32) - a.zp) * np.float32(a.scale)
            if i:
                cost[wf].append(time.perf_counter() - t0)
    return min(cost, key=lambda wf: np.median(cost[wf]))


def want_float_never_released_runtime_buffers(rt, ctx):
    """is_prealloc = 0 and no release: whatever the choice, the note says so."""
    outs = [abi.rknn_output(index=a.index, want_float=0) for a in _attrs(rt, ctx)]
    rt.outputs_get(ctx, outs)
    return 0


def test_ex4_a_missing_release_gets_the_pairing_note(monkeypatch: pytest.MonkeyPatch) -> None:
    _seeded(monkeypatch, 1)
    result = checks.check_want_float(want_float_never_released)
    assert result.passed, result
    note = [d for d in result.details if d.startswith("Note:")]
    assert len(note) == 1 and "(A15)" in note[0] and "Not a failure here" in note[0], note
    # two sentences: the rule, then why it is no failure; no demos to weigh, nothing that reads
    # as if the course and Rockchip both said opposite things
    assert note[0].count(". ") == 1 and "pair every get with one release" in note[0], note[0]
    assert "disagree" not in note[0] and "zipformer" not in note[0] and "is_prealloc = 0" not in note[0]
    leaked = checks.check_want_float(want_float_never_released_runtime_buffers)
    leak_note = [d for d in leaked.details if d.startswith("Note:")]
    assert len(leak_note) == 1 and "used is_prealloc = 0" in leak_note[0] and "(A15)" not in leak_note[0], leaked
    assert not any(d.startswith("Note:") for d in checks.check_want_float(want_float_reference).details)


def test_ex4_the_pairing_facts_stay_in_a_folded_detail() -> None:
    """The facts behind the note (the course's pairing sentence, word for word) are in a
    dropdown of exercise 4, not in the note."""
    nbformat = pytest.importorskip("nbformat")
    lab = nbformat.read(LAB, as_version=4)
    ex4 = next(c.source for c in lab.cells if c.source.startswith("## Exercise 4"))
    detail = ex4.split("```{admonition} Detail: why a missing release is only a note")[1]
    assert detail.split("\n")[1] == ":class: dropdown"
    assert ("This course pairs every rknn_outputs_get with one rknn_outputs_release, also with is_prealloc = 1. "
            "Rockchip's code disagrees. Its dynamic-shape demo says every get must be paired with one release "
            "(after an is_prealloc = 0 get). Its model-zoo zipformer demo "
            "(examples/zipformer/cpp/rknpu2/zipformer.cc) uses is_prealloc = 1 and never releases. With "
            "is_prealloc = 1 the release frees nothing of yours: a simulator assumption (A15), not a documented "
            "fact.") in _flat(detail)


@pytest.mark.parametrize("rule", [want_float_always_int8, want_float_always_float, want_float_get_alone,
                                  want_float_by_bytes])
def test_ex4_wrong_rules_fail(rule, monkeypatch: pytest.MonkeyPatch) -> None:
    for seed in (1, 2):
        _seeded(monkeypatch, seed)
        _failed(checks.check_want_float(rule), "the check measured", "plus your dequantize")


def test_ex4_every_runtime_has_the_shape_it_stands_for() -> None:
    """The planted costs, measured: the float way and the int8 way each twice the other in
    two runtimes; in the third the int8 get alone is cheaper, the int8 way is not."""
    rt = rknnlab.open_runtime()
    from rknnlab import models
    ctx = rt.init(str(models.model_path(checks.WANT_FLOAT_MODEL, "rk3588")))
    try:
        rt.inputs_set(ctx, _frame(rt, ctx))
        rt.run(ctx)
        base = cases.cost_both_ways(rt, ctx)
        got = {p: cases.cost_both_ways(cases.CostlyGet(rt, cases.targets_for(p, base)), ctx, repeats=4)
               for p in cases.PROFILE_TRUTH}
    finally:
        rt.destroy(ctx)
    assert got["float_cheap"][0] > 1.5 * got["float_cheap"][1]
    assert got["int8_cheap"][1] > 1.5 * got["int8_cheap"][0]
    trap = got["the_get_alone"]
    assert trap["get0"] < trap[1] < trap[0]


def _frame(rt, ctx):
    from rknnlab.experiment.variants import frame_input, query_io
    from rknnlab.rknn import buffers
    ins, _ = query_io(rt, ctx)
    return frame_input(np.zeros(buffers.attr_dims(ins[0]), np.uint8))


# =========================================================================== exercise 5 ★ (multi-core speedup)
def _is_split(op):
    return op in ("Add", "Concat") or (op.startswith("Conv") and "Swish" not in op and "Sigmoid" not in op)


@pytest.fixture(scope="module")
def calibration():
    """The practice model's profiles on 1, 2 and 3 cores, as the notebook measures them."""
    import os
    saved = os.environ.get("RKNNLAB_BACKEND")
    os.environ["RKNNLAB_BACKEND"] = "sim"
    try:
        rt = rknnlab.open_runtime()
        got = {n: checks.practice_profile(rt, n) for n in (1, 2, 3)}
        rt.close()
    finally:
        if saved is None:
            os.environ.pop("RKNNLAB_BACKEND", None)
        else:
            os.environ["RKNNLAB_BACKEND"] = saved
    return got


def _fit(calibration, n):
    (one, _), (many, _) = calibration[1], calibration[n]
    rows = many[many["cores"] > 1]
    x = one.set_index("id")["time_us"].loc[rows["id"]].to_numpy(float)
    slope, cost = np.polyfit(x, rows["time_us"].to_numpy(float), 1)
    return 1 / slope, cost


def _amdahl(table, run_ms, gain, cost, split=_is_split, overhead=True):
    rows = table[(table["target"] == "NPU") & table["op"].map(split)]
    s = rows["time_us"].sum()
    t1 = run_ms * 1000 if overhead else table.loc[table["target"] == "NPU", "time_us"].sum()
    return t1 / (t1 - s + s / gain + cost * len(rows))


@pytest.fixture
def speedup_rules(calibration):
    fits = {n: _fit(calibration, n) for n in (2, 3)}

    def reference(table, run_ms, n):
        return _amdahl(table, run_ms, *fits[n])

    def by_big_and_small_layers(table, run_ms, n):
        """Legitimately different: a line through two points, the mean of the largest quarter
        of the split layers and the mean of the smallest quarter (slope: 1 / gain; what is left
        at the small end: the hand-over); the split ops taken from what the practice run split,
        plus Rockchip's names it did not meet."""
        (one, _), (many, _) = calibration[1], calibration[n]
        t1 = one.set_index("id")["time_us"]
        split = many[many["cores"] > 1].assign(t1=lambda d: t1.loc[d["id"]].to_numpy())
        low, high = split["t1"].quantile([0.25, 0.75])
        big, small = split[split["t1"] >= high], split[split["t1"] <= low]
        slope = (big["time_us"].mean() - small["time_us"].mean()) / (big["t1"].mean() - small["t1"].mean())
        gain = float(1 / slope)
        cost = float(small["time_us"].mean() - small["t1"].mean() * slope)
        ops = set(split["op"]) | {"Conv", "ConvClip", "ConvAdd", "ConvAddRelu", "ConvReluAdd", "ConvLeakyRelu",
                                  "ConvLeakyReluAdd", "Relu", "Add", "Concat"}
        return _amdahl(table, run_ms, gain, cost, split=ops.__contains__)

    def linear(table, run_ms, n):
        return float(n)

    def every_layer_splits(table, run_ms, n):
        return _amdahl(table, run_ms, *fits[n], split=lambda op: True)

    def every_conv_splits(table, run_ms, n):
        """Rockchip's list read literally: ConvExSwish is a Conv."""
        return _amdahl(table, run_ms, *fits[n], split=lambda op: op.startswith("Conv") or op in ("Add", "Concat"))

    def no_hand_over_cost(table, run_ms, n):
        return _amdahl(table, run_ms, fits[n][0], 0.0)

    def no_fixed_overhead(table, run_ms, n):
        return _amdahl(table, run_ms, *fits[n], overhead=False)

    def more_cores_never_help(table, run_ms, n):
        return 1.0

    def measured_not_predicted(table, run_ms, n):
        """The shortcut: find the shipped model with this many layers (else the nearest), run
        it on 1 and on n cores, return the measured ratio. No model is needed, but a made-up
        profile has no file to run."""
        from rknnlab import models
        sizes = {m: len(models.load_report(m, "rk3588").layers) for m in models.list_models()
                 if "rk3588" in models.model_socs(m)}
        model = min(sizes, key=lambda m: abs(sizes[m] - len(table)))
        rt = rknnlab.open_runtime()
        try:
            one = checks.run_ms_of(rt, model, abi.RKNN_NPU_CORE_0)
            return one / checks.run_ms_of(rt, model, {2: abi.RKNN_NPU_CORE_0_1, 3: abi.RKNN_NPU_CORE_0_1_2}[n])
        finally:
            rt.close()

    return {f.__name__: f for f in (reference, by_big_and_small_layers, linear, every_layer_splits, every_conv_splits,
                                    no_hand_over_cost, no_fixed_overhead, more_cores_never_help,
                                    measured_not_predicted)}


@pytest.mark.parametrize("name", ["reference", "by_big_and_small_layers"])
def test_ex5_right_rules_pass(name, speedup_rules) -> None:
    result = checks.check_speedup(speedup_rules[name])
    assert result.passed, result
    assert len(result.details) == 2 * (len(checks.SPEEDUP_MODELS) + 4)
    assert sum("made-up model" in d for d in result.details) == 8


@pytest.mark.parametrize("name, words", [
    ("linear", "more than 10% too high"),
    ("every_layer_splits", "yolov5s on 3 cores"),
    ("every_conv_splits", "yolov5s on 3 cores"),
    ("no_hand_over_cost", "too high"),
    # the fixed cost per run (43 us on the simulated rk3588) dwarfs digits_cnn's layers only
    ("no_fixed_overhead", "digits_cnn on 3 cores"),
    ("more_cores_never_help", "too low"),
])
def test_ex5_wrong_rules_fail(name, words, speedup_rules) -> None:
    text = _failed(checks.check_speedup(speedup_rules[name]), "predictions are off by more than 3%", words)
    assert not re.search(r"measured \d|\d\.\d+x measured", text), text


def test_ex5_measuring_every_model_instead_of_predicting_fails(speedup_rules, monkeypatch: pytest.MonkeyPatch) -> None:
    """Running the shipped model behind a profile gets those right; the made-up models have
    no file, so the shortcut fails on them (and only on them)."""
    for seed in (1, 2):
        _seeded(monkeypatch, seed)
        text = _failed(checks.check_speedup(speedup_rules["measured_not_predicted"]), "made-up model",
                       "predict from the profile alone")
        wrong = text.split("Hint:")[0]
        assert not re.search(r"(digits_cnn|mobilenet|resnet|yolov5)\w* on \d cores: you predicted [\d.]+x, ", wrong)


def test_ex5_made_up_models_follow_the_simulators_law() -> None:
    """The truth of a made-up model is what the simulator would measure if it ran those
    layers: npu.layer_times_on with one core against n cores (A17, A44, A45)."""
    from rknnlab.sim import npu, perf
    for seed in range(3):
        for kind in range(len(cases._MADE_UP_MODEL_KINDS)):
            layers = cases.made_up_model(np.random.default_rng(seed), kind)
            one = npu.layer_times_on(layers, "rk3588", (0,))
            table = profile.parse_perf_detail(perf.perf_detail_text(layers, one, "rk3588"))
            for n in (2, 3):
                many = npu.layer_times_on(layers, "rk3588", tuple(range(n)))
                exact = npu.run_seconds_of(one, "rk3588") / npu.run_seconds_of(many, "rk3588")
                law = cases.split_law(table, npu.run_seconds_of(one, "rk3588") * 1e3, n, npu.split_speedup(n),
                                      npu.CORE_SWITCH_S * 1e6, npu.is_split)
                assert law == pytest.approx(exact, rel=2e-3)


def test_ex5_runs_are_timed_without_the_profiling_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    """The speedups come from contexts made without RKNN_FLAG_COLLECT_PERF_MASK; the profile
    from a context made with it (Rockchip: profiled runs may be slower)."""
    flagged, runs = {}, []
    real_init, real_run = SimRuntime.init, SimRuntime.run

    def init(self, model, flag=0, *args, **kwargs):
        ctx = real_init(self, model, flag, *args, **kwargs)
        flagged[ctx] = bool(flag & abi.RKNN_FLAG_COLLECT_PERF_MASK)
        return ctx

    def run(self, ctx, *args, **kwargs):
        runs.append(flagged[ctx])
        return real_run(self, ctx, *args, **kwargs)

    monkeypatch.setattr(SimRuntime, "init", init)
    monkeypatch.setattr(SimRuntime, "run", run)
    table, ms = checks.profile_of(rknnlab.open_runtime(), "mobilenet_v2", abi.RKNN_NPU_CORE_0_1_2)
    assert runs == [True, False, False, False], runs      # one profiled run, then three timed runs
    assert (table["cores"] > 1).any() and ms > 0


def test_ex5_a_table_of_the_failure_messages_learns_nothing(speedup_rules) -> None:
    """The messages never show the measured speedup: a lookup built from them stays wrong."""
    text = repr(checks.check_speedup(speedup_rules["more_cores_never_help"]))
    assert not re.search(r"measured \d", text)


def test_ex5_single_core_soc_says_so(monkeypatch: pytest.MonkeyPatch, speedup_rules) -> None:
    monkeypatch.setattr(checks, "_open_runtime", lambda: SimRuntime("rk3568"))
    _failed(checks.check_speedup(speedup_rules["reference"]), "one NPU core", "unset RKNNLAB_SIM_SOC")

    class Rk3568Board(_Board):
        def __init__(self) -> None:
            self._rt = SimRuntime("rk3568")
            self.backend, self.soc = "native", "rk3568"

    monkeypatch.setattr(checks, "_open_runtime", Rk3568Board)
    _failed(checks.check_speedup(speedup_rules["reference"]), "one NPU core", "RKNNLAB_BACKEND=sim")


class _Board:
    """The simulator dressed as a board's runtime: the check's board path (its tolerance)."""

    def __init__(self) -> None:
        self._rt = SimRuntime("rk3588")
        self.backend, self.soc = "native", "rk3588"

    def __getattr__(self, name):
        return getattr(self._rt, name)


def test_ex5_a_board_is_judged_within_10_percent(monkeypatch: pytest.MonkeyPatch, speedup_rules) -> None:
    """A board's runs vary and its cores are not the simulator's law: 10% there, 3% here."""
    def five_percent_high(table, run_ms, n):
        return 1.05 * speedup_rules["reference"](table, run_ms, n)

    _failed(checks.check_speedup(five_percent_high), "off by more than 3%")
    monkeypatch.setattr(checks, "_open_runtime", _Board)
    result = checks.check_speedup(five_percent_high)
    assert result.passed and "within 10%" in result.message, result
    _failed(checks.check_speedup(speedup_rules["every_conv_splits"]), "off by more than 10%")


def test_ex5_the_practice_model_is_not_judged() -> None:
    assert checks.PRACTICE_MODEL not in checks.SPEEDUP_MODELS


def test_ex5_the_simulators_own_law_is_the_taught_rule() -> None:
    """Calling rknnlab.sim.npu's law with its constants passes on the simulator: it is the rule
    the exercise teaches, with the constants a calibration there finds, so not a wrong answer.
    The lab says those constants hold on the simulator only (a board's check fits its own)."""
    from rknnlab.sim import npu

    def library_law(table, run_ms, n):
        return cases.split_law(table, run_ms, n, npu.split_speedup(n), npu.CORE_SWITCH_S * 1e6, npu.is_split)

    assert checks.check_speedup(library_law).passed
    nbformat = pytest.importorskip("nbformat")
    ex5 = _flat(next(c.source for c in nbformat.read(LAB, as_version=4).cells
                     if c.source.startswith("## Exercise 5")))
    assert "the simulator's own constants in `rknnlab.sim.npu` hold on the simulator only" in ex5


def test_ex5_says_where_the_calibration_goes() -> None:
    """The task names a place that exists: the stub's own cell, above the function (the
    instructor edition's solution does the same)."""
    nbformat = pytest.importorskip("nbformat")
    lab = nbformat.read(LAB, as_version=4)
    ex5 = _flat(next(c.source for c in lab.cells if c.source.startswith("## Exercise 5")))
    assert "in a cell above it" not in ex5
    assert "compute your constants in the same cell, above the function" in ex5
    solution = next(c.source for c in lab.cells if "solution" in c.metadata.get("tags", [])
                    and "def predict_speedup" in c.source)
    assert solution.index("CALIBRATION =") < solution.index("def predict_speedup")


# =========================================================================== the truth stays private
def test_no_truth_table_in_the_namespace() -> None:
    public = {k for k in vars(checks) if not k.startswith("_")}
    assert not {"judged_layers", "rw_rule", "PROFILE_TRUTH", "profile_cases", "profile_text", "targets_for",
                "Pipeline", "plan_pipelines", "SPLIT_OPS"} & public
    steps = checks.practice_pipeline(rknnlab.open_runtime())
    assert [name for name, _ in steps] == list(checks.PHASES)
    assert all(not step.__doc__ and step.__name__.startswith("step_") for _, step in steps)
    # what the steps' closures reach holds no note of the planted phase
    owners = {id(c.cell_contents): c.cell_contents for _, step in steps for c in step.__closure__ or ()}
    assert not any(hasattr(o, "planted") for o in owners.values())


def test_summary_cannot_be_forged() -> None:
    lh.assert_summary_cannot_be_forged(checks, checks.EX_DDR, "check_ddr_bound")


# =========================================================================== the notebook
def test_lab_notebook_structure() -> None:
    nb, text = lh.read_saved_lab(LAB, (
        "**Questions**", "**Objectives**", "## Key points", "## Further reading", "## Your results",
        "A widely copied recipe says", "**What the runtime does:**", "**Evidence:**",
        "```{admonition} Wrong claim:", "```text", "★", "min)", "examples/c/", "**The check**",
        "**The C it stands for:**", ":class: dropdown"))
    assert "seed 00" not in text.lower()
    assert "C2 is the channel block of NC1HWC2. It depends on the SoC and the data type: for int8, C2 is " \
           "16 on rk3588, rk3576 and rk3562, and 8 on rk3566 and rk3568. Read it from dims[4] of the native " \
           "attr; never assume it." in " ".join(text.split())
    lh.assert_solutions_override_their_stubs(nb)
    headings = [c.source.split("\n")[0] for c in nb.cells if c.source.startswith("## Exercise")]
    assert [h.split()[2] for h in headings] == ["1", "2", "3", "4", "5"], headings
    assert "★" in headings[-1] and not any("★" in h for h in headings[:-1])
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert len(cell.source.splitlines()) <= 25, cell.source[:80]


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_lab_states_the_chapters_rules_in_its_words() -> None:
    """One rule per concept: every rule of chapter 3's key points but the last (the simulator's
    timing, which the lab does not use) is in the lab's rules and its key points, word for word;
    the objectives have the chapter's verbs, in the chapter's order."""
    nbformat = pytest.importorskip("nbformat")
    chapter = nbformat.read(ROOT / "chapters" / "03_bottlenecks.ipynb", as_version=4)
    keys = next(c.source for c in chapter.cells if c.cell_type == "markdown" and c.source.startswith("## Key points"))
    rules = [_flat(item) for item in re.split(r"\n- ", keys.split("\n\n")[1].lstrip("- "))]
    assert len(rules) >= 5
    lab = nbformat.read(LAB, as_version=4)
    header = _flat(lab.cells[0].source)
    key_points = _flat(next(c.source for c in lab.cells if c.source.startswith("## Key points")))
    for rule in rules[:-1]:
        assert rule in header and rule in key_points, rule
    verbs = re.findall(r"\d\. \*\*(\w+)\*\*", header)
    assert verbs == re.findall(r"- \*\*(\w+)\*\*", chapter.cells[0].source) == ["Find", "Predict", "Spot", "Choose"]


test_lab_instructor_edition_passes_every_check, test_lab_student_edition_runs_and_reports_not_done = \
    lh.edition_tests(LAB, n_checks=5)


def test_ex5_made_up_models_use_only_ops_whose_split_the_lab_teaches() -> None:
    """ppocr_det brought ops (ConvTranspose, ConvHardSwish, Mul, ...) whose split on a board is a
    simulator assumption: made-up models leave them out, so the taught rule stays the truth."""
    rng = np.random.default_rng(7)
    for kind in range(len(cases._MADE_UP_MODEL_KINDS)):
        for _ in range(20):
            ops = {x["op"] for x in cases.made_up_model(rng, kind)[1:-1]}
            assert ops <= cases.MADE_UP_MODEL_OPS, ops
