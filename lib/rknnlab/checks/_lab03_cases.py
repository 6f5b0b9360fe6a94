"""What Lab 3's checks hand to the student, with the truth kept here (import it from nowhere).

- exercise 1: seeded pipelines (a list of (phase name, step) pairs) built on the runtime at
  hand, each with one phase planted as the bottleneck and, in some, a phase whose first
  call is slow (a lazy set-up);
- exercise 2: the compiler reports' layers the rule of RW(KB) is judged on, the rule, and
  made-up layers (shapes no shipped model has) whose truth is that rule (partly inferred:
  see made_up_layers);
- exercise 3: per-layer profile texts in the runtime's RKNN_QUERY_PERF_DETAIL format, drawn
  from the reports' layers with new cycles, and which of their layers are DDR-bound;
- exercise 4: runtimes whose rknn_outputs_get costs more with one want_float than the other;
- exercise 5: made-up models (layers drawn from the shipped reports, a new op mix and new
  cycles) and the law of their speedup (A17, A44, A45), with the fit a board's truth uses.

The steps and runtimes carry neutral names and no docstrings: help() and __name__ must not
give the answer away.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Set, Tuple

import numpy as np

from ..i18n import pick as L
from ..rknn import abi

# =========================================================================== exercise 1: pipelines
PHASES = ("preprocess", "inputs_set", "run", "outputs_get", "postprocess")


def _spin(seconds: float) -> None:
    """CPU work for ``seconds`` of wall time (a CPU phase: the core is busy, never asleep)."""
    end = time.perf_counter() + seconds
    x = 0
    while time.perf_counter() < end:
        x += 1


class _Work:
    """Real numpy work sized to take about ``seconds``: a softmax and a top-k over a row."""

    def __init__(self, seconds: float, rng: np.random.Generator) -> None:
        self.data = rng.standard_normal(1 << 16).astype(np.float32)
        per_pass = self._time_one()
        self.passes = max(1, int(round(seconds / per_pass)))

    def _one(self) -> float:
        e = np.exp(self.data - self.data.max())
        p = e / e.sum()
        return float(np.partition(p, -5)[-5:].sum())

    def _time_one(self) -> float:
        self._one()
        t = []
        for _ in range(5):
            t0 = time.perf_counter()
            self._one()
            t.append(time.perf_counter() - t0)
        return max(float(np.median(t)), 1e-6)

    def __call__(self) -> float:
        s = 0.0
        for _ in range(self.passes):
            s += self._one()
        return s


class Pipeline:
    """A frame's phases on one context.  It keeps no note of which phase was made the
    slowest: the steps' closures reach this object, and the check judges by its own timing."""

    def __init__(self, rt: Any, model_file: str, first_call: Optional[str],
                 cpu_ms: Dict[str, float], rng: np.random.Generator) -> None:
        from ..experiment.variants import frame_input, query_io
        from ..rknn import buffers
        self.rt, self._slow_once = rt, first_call
        self.ctx = rt.init(model_file)
        ins, outs = query_io(rt, self.ctx)
        dims = buffers.attr_dims(ins[0])
        if ins[0].fmt == abi.RKNN_TENSOR_NCHW:
            dims = (dims[0], dims[2], dims[3], dims[1])
        frame = rng.integers(0, 256, size=dims, dtype=np.uint8)
        self._inputs = frame_input(frame)
        self._outs = [a.index for a in outs]
        self._pre = _Work(cpu_ms["preprocess"] / 1e3, rng)
        self._post = _Work(cpu_ms["postprocess"] / 1e3, rng)
        self._first_ms = cpu_ms.get("first_call", 0.0)
        self._called: Set[str] = set()

    def _once(self, name: str) -> None:
        if name == self._slow_once and name not in self._called:
            _spin(self._first_ms / 1e3)          # a lazy set-up on the first call only
        self._called.add(name)

    def steps(self) -> List[Tuple[str, Callable[[], Any]]]:
        rt, ctx = self.rt, self.ctx

        def step_a() -> Any:
            self._once("preprocess")
            return self._pre()

        def step_b() -> Any:
            self._once("inputs_set")
            return rt.inputs_set(ctx, self._inputs)

        def step_c() -> Any:
            self._once("run")
            return rt.run(ctx)

        def step_d() -> Any:
            self._once("outputs_get")
            outs = [abi.rknn_output(index=k, want_float=1, is_prealloc=0) for k in self._outs]
            rt.outputs_get(ctx, outs)
            return rt.outputs_release(ctx, outs)

        def step_e() -> Any:
            self._once("postprocess")
            return self._post()

        return list(zip(PHASES, (step_a, step_b, step_c, step_d, step_e)))

    def close(self) -> None:
        try:
            self.rt.destroy(self.ctx)
        except Exception:
            pass


def measure_phases(steps: Sequence[Tuple[str, Callable[[], Any]]], frames: int, skip: int) -> Dict[str, float]:
    """The median wall time (s) of each phase over ``frames`` frames after ``skip`` warm-up frames."""
    times: Dict[str, List[float]] = {name: [] for name, _ in steps}
    for i in range(skip + frames):
        for name, step in steps:
            t0 = time.perf_counter()
            step()
            if i >= skip:
                times[name].append(time.perf_counter() - t0)
    return {name: float(np.median(v)) for name, v in times.items()}


#: the kinds of pipeline a check draws: (the planted bottleneck, the model whose run it uses,
#: the phase with a slow first call or None)
PIPELINE_KINDS = (
    ("run", "big", "postprocess"),
    ("run", "big", None),
    ("postprocess", "small", None),
    ("preprocess", "small", "postprocess"),
    ("postprocess", "small", "run"),
)


def plan_pipelines(rng: np.random.Generator, n: int = 4) -> List[Tuple[str, str, Optional[str]]]:
    """``n`` pipeline kinds for one check: every kind of bottleneck at least once, in a random order."""
    kinds = list(PIPELINE_KINDS)
    order = [kinds[int(i)] for i in rng.permutation(len(kinds))]
    chosen = order[:n]
    if not any(k[0] == "preprocess" for k in chosen):
        chosen[-1] = PIPELINE_KINDS[3]
    if not any(k[0] == "run" for k in chosen):
        chosen[0] = PIPELINE_KINDS[0]
    return [chosen[int(i)] for i in rng.permutation(len(chosen))]


# =========================================================================== exercise 2: RW(KB) of a layer
#: ops whose fused addend is not among the shapes the compiler lists (they read a tensor the
#: layer's shapes do not show), and the layers of the model's input and output (the CPU's)
_NOT_JUDGED_OPS = ("InputOperator", "OutputOperator", "Reshape")
#: an answer counts as right within this fraction of the compiler's figure, plus SLACK_BYTES
TOLERANCE = 0.08
SLACK_BYTES = 2048


def is_conv(op: str) -> bool:
    return op.startswith("Conv")


def rw_rule(layer: Dict[str, Any], c2: int) -> int:
    """Bytes a layer reads by the course's rule: each activation input at 1 B per element, its
    channels padded up to a multiple of C2; plus the weights at 1 B each; not the output.  (A
    Conv's RW column in the shipped reports also holds a median 8 B per output channel, the
    bias and one more value per channel: inside the tolerance but in the few wide, small
    layers that judged_layers leaves out.)"""
    shapes = layer["input_shapes"]
    acts, weights = (shapes[:1], shapes[1]) if is_conv(layer["op"]) else (shapes, None)
    total = 0
    for s in acts:
        if len(s) == 4:
            total += s[0] * (-(-s[1] // c2) * c2) * s[2] * s[3]
        else:
            total += int(np.prod(s))
    if weights is not None:
        total += int(np.prod(weights))
    return int(total)


def within(value: float, truth: float) -> bool:
    return abs(value - truth) <= TOLERANCE * truth + SLACK_BYTES


def _structurally_judged(layer: Dict[str, Any], input_shape: List[int]) -> bool:
    op, shapes = layer["op"], layer["input_shapes"]
    if layer["target"] != "NPU" or op in _NOT_JUDGED_OPS or not shapes:
        return False
    if "Add" in op and is_conv(op):
        return False                     # a fused Add reads a tensor the shapes do not list
    if shapes[0] == input_shape:
        return False                     # reads the model's input (NHWC, not padded to C2)
    if op == "Concat" and sum(s[1] for s in shapes) != layer["output_shapes"][0][1]:
        return False                     # the list of inputs was cut short
    return True


def c2_of(report: Any) -> Optional[int]:
    """C2 of a report's int8 NC1HWC2 native outputs (None when it has none)."""
    for attr in report.attrs("outputs", "native"):
        if attr["fmt"] == "RKNN_TENSOR_NC1HWC2":
            return int(attr["dims"][4])
    return None


def shipped_c2() -> Dict[str, int]:
    """{soc: C2 of the int8 NC1HWC2 outputs of the models built for it}."""
    from .. import models
    c2_by_soc: Dict[str, int] = {}
    for name in models.list_models():
        for soc in models.model_socs(name):
            c2 = c2_of(models.load_report(name, soc))
            if c2:
                c2_by_soc.setdefault(soc, c2)
    return c2_by_soc


def judged_layers() -> List[Dict[str, Any]]:
    """Every layer of every shipped report that exercise 2 judges: {"model", "soc", "layer" (id,
    op, input_shapes, output_shape), "truth" (bytes), "c2"}.  The layers whose C2 comes from a
    build of the same SoC; a layer where the rule itself misses the compiler's figure by more
    than the tolerance is not judged (a handful, under 1%: wide layers of few pixels, where the
    8 B per output channel the compiler also counts are a large share)."""
    from .. import models
    c2_by_soc = shipped_c2()
    out = []
    for name in models.list_models():
        for soc in models.model_socs(name):
            if soc not in c2_by_soc:
                continue
            rep = models.load_report(name, soc)
            input_shape = rep.layers[0]["output_shapes"][0] if rep.layers[0]["output_shapes"] else []
            for layer in rep.layers:
                if not _structurally_judged(layer, input_shape):
                    continue
                truth = float(layer["rw_kb"]) * 1024
                if not within(rw_rule(layer, c2_by_soc[soc]), truth):
                    continue
                out.append({"model": name, "soc": soc, "c2": c2_by_soc[soc], "truth": truth,
                            "layer": {"id": int(layer["id"]) + 1, "op": layer["op"],
                                      "input_shapes": [list(s) for s in layer["input_shapes"]],
                                      "output_shape": list(layer["output_shapes"][0])}})
    return out


#: exercise 2's made-up layers: channel counts no multiple of 16 (most tell C2 = 8 from 16,
#: some are no multiple of 8 either), and the ops whose shapes list everything they read
_MADE_UP_CHANNELS = (12, 20, 24, 36, 40, 44, 56, 72, 88, 136)
_MADE_UP_CONVS = ("Conv", "ConvClip", "ConvRelu", "ConvExSwish")
#: bytes per output channel a Conv's RW column also holds in the shipped reports (a median)
CONV_EXTRA_PER_CHANNEL = 8


def out_channels(layer: Dict[str, Any]) -> int:
    """A layer's output channels, from its output shape: a depthwise conv's weights are listed
    as [1, C, kh, kw], so their dim 0 is not its output channels."""
    return int(layer["output_shape"][1])


def _pad(s: Sequence[int], c2: int) -> int:
    return s[0] * (-(-s[1] // c2) * c2) * s[2] * s[3]


def _padded_weights(layer: Dict[str, Any], c2: int) -> int:
    """A wrong reading: the weights' input channels padded to C2 too."""
    if not is_conv(layer["op"]):
        return rw_rule(layer, c2)
    w = layer["input_shapes"][1]
    return rw_rule(layer, c2) - int(np.prod(w)) + _pad(w, c2)


def _made_up_layer(rng: np.random.Generator) -> Dict[str, Any]:
    ch = lambda: int(rng.choice(_MADE_UP_CHANNELS))          # noqa: E731
    h, w = (int(v) for v in rng.integers(6, 90, size=2))
    kind = int(rng.integers(5))
    if kind == 0:                                            # an Add of two equal inputs
        c = ch()
        return {"op": "Add", "input_shapes": [[1, c, h, w], [1, c, h, w]], "output_shape": [1, c, h, w]}
    if kind == 1:                                            # a Concat of two or three
        cs = [ch() for _ in range(int(rng.integers(2, 4)))]
        return {"op": "Concat", "input_shapes": [[1, c, h, w] for c in cs], "output_shape": [1, sum(cs), h, w]}
    op = str(rng.choice(_MADE_UP_CONVS))
    cin = ch()
    if kind == 2:                                            # a depthwise 3x3 (weights as the reports list them)
        return {"op": op, "input_shapes": [[1, cin, h, w], [1, cin, 3, 3], [cin]], "output_shape": [1, cin, h, w]}
    if kind == 3:                                            # a 1x1 or 3x3 over a large input
        k, cout = int(rng.choice((1, 3))), int(rng.choice((16, 24, 32, 48)))
    else:                                                    # weights that outweigh a small input
        h, w = (int(v) for v in rng.integers(3, 9, size=2))
        k, cout = 3, int(rng.choice((256, 384, 512)))
    return {"op": op, "input_shapes": [[1, cin, h, w], [cout, cin, k, k], [cout]], "output_shape": [1, cout, h, w]}


def made_up_truth(layer: Dict[str, Any], c2: int) -> float:
    """The bytes a made-up layer reads: the course's rule, plus the 8 B per output channel a
    Conv's column holds in the shipped reports (an answer with or without them is right).  The
    output channels come from the output shape (a depthwise conv's weights are [1, C, 3, 3])."""
    extra = CONV_EXTRA_PER_CHANNEL * out_channels(layer) if is_conv(layer["op"]) else 0
    return float(rw_rule(layer, c2) + extra)


def made_up_layers(rng: np.random.Generator, c2_by_soc: Dict[str, int], n: int = 48,
                   telling: int = 6) -> List[Dict[str, Any]]:
    """``n`` or more layers with shapes and channel counts no shipped model has, half of them on a
    SoC whose C2 is 8 and half on SoCs whose C2 is 16, as judged_layers' cases (model "made-up").
    Their truth is the rule (made_up_truth), which judged_layers checks on every shipped layer;
    part of it is inferred, not confirmed.  The shipped reports confirm the weights, inputs
    whose channels are a multiple of C2, padding for Conv inputs of 24 channels at C2 = 16
    (about ten ConvClips) and, in ppocr_det's reports, padding for Add, Mul and Conv inputs
    whose channels are not a multiple of C2, at C2 = 16 and at C2 = 8.  No shipped Concat has
    an input whose channels are not a multiple of C2: its padded bytes are inferred from the
    NC1HWC2 layout.  Those cases are what tells
    C2 = 8, C2 = 16 and no padding apart, so they stay (a table read from the reports must not
    pass).  Drawn until at least ``telling`` of them tell each wrong reading (the other C2, no padding,
    padded weights) from the rule by more than the tolerance."""
    by_c2: Dict[int, List[str]] = {}
    for soc, c2 in sorted(c2_by_soc.items()):
        by_c2.setdefault(c2, []).append(soc)
    groups = sorted(by_c2)
    other = {c: (groups[-1] if c == groups[0] else groups[0]) for c in groups}
    wrongs = {"other C2": lambda lay, c2: rw_rule(lay, other[c2]), "no padding": lambda lay, c2: rw_rule(lay, 1),
              "padded weights": _padded_weights}
    told = {k: 0 for k in wrongs}
    out: List[Dict[str, Any]] = []
    while len(out) < n or (min(told.values()) < telling and len(out) < 8 * n):
        c2 = groups[len(out) % len(groups)]
        soc = str(rng.choice(by_c2[c2]))
        layer = _made_up_layer(rng)
        truth = made_up_truth(layer, c2)
        if not within(rw_rule(layer, c2), truth):            # the 8 B per channel must not decide
            continue
        layer["id"] = len(out) + 1
        for k, wrong in wrongs.items():
            told[k] += not within(wrong(layer, c2), truth)
        out.append({"model": "made-up", "soc": soc, "c2": c2, "truth": truth, "layer": layer})
    return out


def native_attr_from_report(soc: str) -> abi.rknn_tensor_attr:
    """The NC1HWC2 native output attr of a model built for ``soc``, as its runtime reports it."""
    from .. import models
    from ..sim.model import attr_from_report
    for name in models.list_models():
        if soc in models.model_socs(name):
            for attr in models.load_report(name, soc).attrs("outputs", "native"):
                if attr["fmt"] == "RKNN_TENSOR_NC1HWC2":
                    return attr_from_report(attr)
    raise LookupError(f"no NC1HWC2 output in the {soc} builds")   # en-only


def nc1hwc2_model(soc: str) -> Optional[str]:
    from .. import models
    for name in models.list_models():
        if soc in models.model_socs(name) and c2_of(models.load_report(name, soc)):
            return name
    return None


# =========================================================================== exercise 4: want_float
class CostlyGet:
    """The runtime at hand, whose rknn_outputs_get takes ``seconds[want_float]`` of wall time:
    the real get, then CPU work until that time has passed (the conversion a runtime does
    on the CPU costs differently on other runtimes and CPUs).  The targets lie well above
    the real get's own time, so the real get's jitter does not change them."""

    def __init__(self, rt: Any, seconds: Dict[int, float]) -> None:
        self._rt = rt
        self.backend = getattr(rt, "backend", "")
        self.soc = getattr(rt, "soc", None)
        self._seconds = dict(seconds)
        #: gets, gets with is_prealloc = 0, releases: counted, for the pairing note
        self.gets = self.gets_runtime_buffers = self.releases = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._rt, name)

    def outputs_release(self, ctx: int, outputs: Sequence[abi.rknn_output]) -> int:
        self.releases += 1
        return self._rt.outputs_release(ctx, outputs)

    def outputs_get(self, ctx: int, outputs: Sequence[abi.rknn_output], extend: Any = None) -> int:
        self.gets += 1
        self.gets_runtime_buffers += any(not o.is_prealloc for o in outputs)
        start = time.perf_counter()
        ret = self._rt.outputs_get(ctx, outputs, extend)
        target = max(self._seconds.get(int(o.want_float), 0.0) for o in outputs) if outputs else 0.0
        _spin(start + target - time.perf_counter())
        return ret


def dequantize(q: np.ndarray, zp: int, scale: float) -> np.ndarray:
    return (q.astype(np.float32) - np.float32(zp)) * np.float32(scale)


def cost_both_ways(rt: Any, ctx: int, repeats: int = 9) -> Dict[Any, float]:
    """Least seconds (of ``repeats``) to get float scores each way: 1 = rknn_outputs_get with want_float = 1;
    0 = want_float = 0, then numpy dequantizes with the attr's zp and scale; "get0" = that
    get alone, without the dequantize."""
    import ctypes
    n_out = rt.query(ctx, abi.RKNN_QUERY_IN_OUT_NUM).n_output
    attrs = [rt.query(ctx, abi.RKNN_QUERY_OUTPUT_ATTR, abi.rknn_tensor_attr(index=k)) for k in range(n_out)]
    cost: Dict[Any, List[float]] = {0: [], 1: [], "get0": []}
    for i in range(repeats + 1):
        for wf in (1, 0):
            outs = [abi.rknn_output(index=k, want_float=wf, is_prealloc=0) for k in range(n_out)]
            t0 = time.perf_counter()
            rt.outputs_get(ctx, outs)
            t_get = time.perf_counter()
            if wf == 0:
                for o, a in zip(outs, attrs):
                    q = np.frombuffer((ctypes.c_int8 * int(o.size)).from_address(o.buf), np.int8)
                    dequantize(q, a.zp, a.scale)
            dt = time.perf_counter() - t0
            rt.outputs_release(ctx, outs)
            if i:
                cost[wf].append(dt)
                if wf == 0:
                    cost["get0"].append(t_get - t0)
    return {k: float(np.min(v)) for k, v in cost.items()}   # the least disturbed: load only adds


def targets_for(profile: str, cost: Dict[Any, float]) -> Dict[int, float]:
    """Seconds per want_float for a runtime of ``profile``, from the real runtime's measured
    ``cost``: a unit U twice its dearer way (plus 1 ms), and D, numpy's dequantize.
    float_cheap: the int8 get alone costs 2.5 U, the float get U.  int8_cheap: the float get
    costs 3 U, the int8 get U.  the_get_alone: the int8 get U, the float get U + D / 2: the
    int8 get alone is cheaper, the int8 get plus the dequantize is not."""
    d = max(cost[0] - cost["get0"], 1e-4)
    unit = 2 * max(cost[1], cost[0]) + 1e-3
    return {"float_cheap": {0: 2.5 * unit, 1: unit}, "int8_cheap": {0: unit, 1: 3 * unit},
            "the_get_alone": {0: unit, 1: unit + 0.5 * d}}[profile]


#: exercise 4's cost profiles and the want_float that is right in each
PROFILE_TRUTH = {"float_cheap": 1, "int8_cheap": 0, "the_get_alone": 1}


# =========================================================================== exercise 3: profile texts
RULE = "-" * 190
#: the runtime's own column names (en-only: the text it prints, in any language)
HEADER = ("ID", "OpType", "DataType", "Target", "InputShape", "OutputShape", "Cycles(DDR/NPU/Total)",  # en-only
          "Time(us)", "MacUsage(%)", "WorkLoad(0/1/2)", "RW(KB)", "FullName")
WIDTHS = (5, 17, 9, 7, 41, 23, 25, 13, 21, 21, 13, 0)
#: bytes the DDR moves per NPU cycle for a layer without compute cycles (F4, a board trace)
BYTES_PER_DDR_CYCLE = 11.8
NPU_HZ = 1.0e9
MACS_PER_CYCLE = 1024


def _cells(values: Sequence[str], widths: Sequence[int]) -> str:
    out = ""
    for v, w in zip(values, widths):
        out += v if not w else (f"{v:<{w}}" if len(v) < w else v + " ")
    return out.rstrip()


def _shape(s: Sequence[int]) -> str:
    return "(" + ",".join(str(int(d)) for d in s) + ")"


def _shapes(shapes: Sequence[Sequence[int]]) -> str:
    if not shapes:
        return "\\"
    text = ",".join(_shape(s) for s in shapes[:3])
    return text + (",..." if len(shapes) > 3 else "")


def _macs(layer: Dict[str, Any]) -> int:
    if not is_conv(layer["op"]) or len(layer["input_shapes"]) < 2 or not layer["output_shapes"]:
        return 0
    w = layer["input_shapes"][1]
    return int(np.prod(layer["output_shapes"][0])) * int(np.prod(w[1:]))


def profile_text(rng: np.random.Generator, style: str = "board", soc_cores: int = 3,
                 model: Optional[str] = None) -> Tuple[str, Dict[str, Set[int]]]:
    """One per-layer profile in the runtime's text format, from the layers of a shipped model
    with new cycles, and its truth: {"ddr": ids with DDR > NPU cycles, "tie": DDR == NPU > 0,
    "zero": 0/0 cycles, "ddr_only": DDR > 0 with NPU 0}.  ``style`` "board": a layer the
    compiler gives no cycles shows DDR cycles (RW bytes / 11.8 per cycle, as in a board's
    trace); "compiler": it shows 0/0/0."""
    from .. import models
    names = [m for m in models.list_models() if "rk3588" in models.model_socs(m)]
    name = model or str(rng.choice(names))
    layers = models.load_report(name, "rk3588").layers
    rows, truth = [], {"ddr": set(), "tie": set(), "zero": set(), "ddr_only": set()}
    per_op: Dict[str, List[float]] = {}
    cpu_op: Dict[str, float] = {}
    total_us = total_kb = 0.0
    for layer in layers:
        rid = int(layer["id"]) + 1
        op, target = layer["op"], layer["target"]
        rw_kb = float(layer["rw_kb"])
        ddr, npu = int(layer["cycles_ddr"]), int(layer["cycles_npu"])
        if target == "NPU" and (ddr or npu):
            npu = int(npu * rng.uniform(0.5, 1.5))
            ddr = int(ddr * rng.uniform(0.5, 2.5))
            if rng.random() < 0.12:
                ddr = npu                              # a tie: balanced, not DDR-bound
            ddr, npu = max(ddr, 1), max(npu, 1)
        elif target == "NPU" and rw_kb > 0 and style == "board":
            ddr, npu = int(rw_kb * 1024 / BYTES_PER_DDR_CYCLE * rng.uniform(0.8, 1.2)), 0
        else:
            ddr = npu = 0
        tot = max(ddr, npu)
        if target == "CPU":
            us = float(rng.uniform(5, 60))
        else:
            us = tot / NPU_HZ * 1e6 * float(rng.uniform(1.0, 1.6))
        us = max(round(us), 1) if target == "CPU" or tot else 0
        macs = _macs(layer)
        mac = f"{100 * macs / (us * 1e-6 * MACS_PER_CYCLE * NPU_HZ):.2f}" if macs and us else "\\"
        if mac != "\\":
            mac += "/0.00" * (soc_cores - 1)
        load = "/".join(["100.0%"] + ["0.0%"] * (soc_cores - 1))
        if ddr > npu:
            truth["ddr"].add(rid)
            if npu == 0:
                truth["ddr_only"].add(rid)
        elif ddr == npu and ddr > 0:
            truth["tie"].add(rid)
        elif ddr == npu == 0:
            truth["zero"].add(rid)
        ins = "\\" if op == "InputOperator" else _shapes(layer["input_shapes"])
        out = "\\" if op == "OutputOperator" else _shapes(layer["output_shapes"])
        rows.append(_cells([str(rid), op, layer["dtype"], target, ins, out, f"{ddr}/{npu}/{tot}", str(us),
                            mac, load, f"{rw_kb:g}", layer["name"]], WIDTHS))
        per_op.setdefault(op, []).append(us)
        if target == "CPU":
            cpu_op[op] = cpu_op.get(op, 0.0) + us
        total_us += us
        total_kb += rw_kb
    head = list(HEADER)
    head[9] = "WorkLoad(" + "/".join(str(k) for k in range(soc_cores)) + ")"
    lines = [RULE, f"{'Network Layer Information Table':^190}".rstrip(), RULE, _cells(head, WIDTHS), RULE]  # en-only
    lines += rows
    lines += [RULE, f"Total Operator Elapsed Per Frame Time(us): {int(total_us)}",  # en-only
              f"Total Memory Read/Write Per Frame Size(KB): {total_kb:.2f}", RULE]  # en-only
    rank_w = (17, 13, 13, 13, 13, 14, 0)
    lines += [f"{'Operator Time Consuming Ranking Table':^120}".rstrip(), RULE,  # en-only
              _cells(["OpType", "CallNumber", "CPUTime(us)", "GPUTime(us)", "NPUTime(us)", "TotalTime(us)",
                      "TimeRatio(%)"], rank_w), RULE]
    for op, ts in sorted(per_op.items(), key=lambda kv: -sum(kv[1])):
        tot_op = sum(ts)
        cpu = cpu_op.get(op, 0.0)
        lines.append(_cells([op, str(len(ts)), str(int(cpu)), "0", str(int(tot_op - cpu)), str(int(tot_op)),
                             f"{100 * tot_op / max(total_us, 1):.2f}%"], rank_w))
    lines.append(RULE)
    return "\n".join(lines) + "\n", truth


def profile_cases(seed: int, n: int = 6) -> List[Tuple[str, Dict[str, Set[int]]]]:
    """``n`` profiles for one check: both styles, 3-core and 2-core SoCs' headers."""
    rng = np.random.default_rng(seed)
    cases = []
    for k in range(n):
        style = "board" if k % 2 == 0 else "compiler"
        cases.append(profile_text(rng, style=style, soc_cores=3 if k % 3 else 2))
    return [cases[int(i)] for i in rng.permutation(n)]


def parse_rows(text: str) -> Iterator[Dict[str, Any]]:
    """The layer rows of a profile text (the check's own reading: between the header's rule and
    the next rule)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[:2] == ["ID", "OpType"]) + 2
    for line in lines[start:]:
        if line.startswith("---"):
            return
        f = line.split()
        ddr, npu, tot = (int(x) for x in f[6].split("/"))
        yield {"id": int(f[0]), "op": f[1], "ddr": ddr, "npu": npu, "total": tot, "time_us": float(f[7]),
               "rw_kb": float(f[10])}


def trap_words(kind: str) -> str:
    """What a group of wrongly judged layers is, said after a wrong answer (never which ids), in
    the language the check speaks."""
    return {
        "tie": lambda: L("layers whose DDR and NPU cycles are equal", "DDR 周期与 NPU 周期相等的层"),
        "zero": lambda: L("layers with 0 DDR and 0 NPU cycles", "DDR 周期和 NPU 周期都为 0 的层"),
        "ddr_only": lambda: L("layers with DDR cycles and 0 NPU cycles", "有 DDR 周期、NPU 周期为 0 的层"),
        "ddr": lambda: L("other layers with more DDR cycles than NPU cycles", "其他 DDR 周期多于 NPU 周期的层"),
        "compute": lambda: L("layers with more NPU cycles than DDR cycles", "NPU 周期多于 DDR 周期的层"),
        "not_a_layer": lambda: L("numbers that are not layer IDs of the profile", "不是该性能分析中层 ID 的数字"),
    }[kind]()


# =========================================================================== exercise 5: made-up models
#: what makes made-up models differ: (layers, cycle scale, share of Conv + SiLU layers)
_MADE_UP_MODEL_KINDS = (
    ((6, 14), (0.01, 0.05), 0.3),       # a tiny network: the hand-over per split can outweigh the gain
    ((30, 80), (0.5, 2.0), 0.7),        # mostly Conv + SiLU: little is split
    ((30, 80), (0.5, 2.0), 0.0),        # no Conv + SiLU: mostly split ops
    ((15, 60), (0.1, 1.0), 0.4),        # in between
)


#: op types exercise 5 draws its made-up models from: those whose split the lab teaches (the API
#: reference's list, and ConvExSwish that a public trace shows unsplit) or that it measures in the
#: practice run. ppocr_det's other ops (ConvTranspose, ConvHardSwish, Mul, ...) are left out: which
#: of them a board splits is a simulator assumption (A17), not something the lab can teach.
MADE_UP_MODEL_OPS = frozenset({"Add", "Concat", "Conv", "ConvAdd", "ConvAddRelu", "ConvClip", "ConvExSwish",
                               "ConvRelu", "ConvReluAdd", "MaxPool", "Reshape", "Resize"})


def made_up_model(rng: np.random.Generator, kind: int, soc: str = "rk3588") -> List[Dict[str, Any]]:
    """The layers of a model no file holds, in a compiler report's form: layers drawn from the
    shipped reports of ``soc`` (a new op mix, new cycles; op types in MADE_UP_MODEL_OPS),
    between an InputOperator and an OutputOperator."""
    from .. import models
    swish: List[Dict[str, Any]] = []
    rest: List[Dict[str, Any]] = []
    first = last = None
    for name in models.list_models():
        if soc in models.model_socs(name):
            layers = models.load_report(name, soc).layers
            for x in layers:
                if x["target"] == "NPU" and x["op"] in MADE_UP_MODEL_OPS:
                    (swish if x["op"] == "ConvExSwish" else rest).append(x)
            first, last = first or layers[0], last or layers[-1]
    (lo, hi), (s_lo, s_hi), p_swish = _MADE_UP_MODEL_KINDS[kind]
    picks = [swish[int(rng.integers(len(swish)))] if rng.random() < p_swish else rest[int(rng.integers(len(rest)))]
             for _ in range(int(rng.integers(lo, hi + 1)))]
    scale = float(rng.uniform(s_lo, s_hi))
    out = [dict(first, id=0, name="InputOperator:input")]
    for k, layer in enumerate(picks, 1):
        x = dict(layer, id=k, name=f"{layer['op']}:made_up_{k}")
        for key in ("cycles_ddr", "cycles_npu", "cycles_total"):
            x[key] = int(x[key] * scale * rng.uniform(0.7, 1.3))
        x["cycles_total"] = max(x["cycles_ddr"], x["cycles_npu"])
        out.append(x)
    out.append(dict(last, id=len(out), name="OutputOperator:output"))
    return out


def split_law(table: Any, run_ms: float, n_cores: int, gain: float, cost_us: float,
              split: Callable[[str], bool]) -> float:
    """The speedup the simulator's law gives a model from its single-core profile: the split
    layers (A17) run ``gain`` times faster and pay ``cost_us`` each (A44, A45); the rest of the
    run, its fixed cost included, does not shrink."""
    rows = table[(table["target"] == "NPU") & table["op"].map(split)]
    t1 = run_ms * 1000
    s = float(rows["time_us"].sum())
    return t1 / (t1 - s + s / gain + cost_us * len(rows))


def fit_split(one: Any, many: Any) -> Tuple[float, float]:
    """(how many times faster a split layer ran, us each split cost): a straight line through
    the split layers' times on n cores against their times on one core."""
    rows = many[many["cores"] > 1]
    t1 = one.set_index("id").loc[rows["id"], "time_us"].to_numpy(float)
    slope, cost_us = np.polyfit(t1, rows["time_us"].to_numpy(float), 1)
    return 1 / slope, float(cost_us)
