"""Chapter 0 (setup and tour): the self-check at the end of the chapter, one check per question.

==============================  ==================================================================
:func:`check_backends`          1. which backend ``auto`` picks: on this machine, and on four
                                   machines described in :data:`SCENARIOS`
:func:`check_output_bytes`      2. ``output_bytes(attr, want_float)``: the bytes of an output
                                   as ``rknn_outputs_get`` gives it
:func:`check_leak_verdicts`     3. ``leak_verdict(result, variant)``: "leaks", "no leak" or
                                   "cannot tell"?
==============================  ==================================================================

The truth comes from the checks' own work: :func:`rknnlab.board.choose_backend` on this
machine and on described boards; the sizes this runtime (the board's NPU, or the simulator)
gives for every output of several models, and of those outputs held as float32 and float16;
and runs that this module builds with a known leak, none, or too much noise to decide.
Nothing is written down here as an answer.  The notebook imports
``from rknnlab.checks import ch00 as checks``; :func:`summary` lists the three questions.
"""
from __future__ import annotations

import random
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..rknn import abi, buffers
from ._core import (CheckResult, Lab, _Fail, _current_soc, _frames, _model_file, _not_done,
                    _open_runtime, _student_error, _whole_number)

__all__ = ["CheckResult", "check_backends", "check_output_bytes", "check_leak_verdicts",
           "summary", "results", "SCENARIOS", "ANSWERS", "mystery_run"]

Q1 = "Question 1 — which backend auto picks"
Q2 = "Question 2 — the bytes of an output"
Q3 = "Question 3 — does it leak?"

_LAB = Lab("Chapter 0 self-check", [Q1, Q2, Q3])

#: the machines of question 1 (the check asks rknnlab.board.choose_backend about each)
SCENARIOS = {
    "A": "this machine, as the notebook runs now",
    "B": "an RK3588 board with librknnrt.so in /usr/lib and a mainline kernel: its NPU driver is "
         "'rocket' (/dev/accel/accel0), there is no rknpu device node",
    "C": "an RK3588 board with Rockchip's vendor kernel (/dev/dri/card1, driver rknpu) and "
         "librknnrt.so in /usr/lib, where RKNNLAB_BACKEND=sim is set",
    "D": "an RK3588 board with Rockchip's vendor kernel (/dev/dri/card1, driver rknpu) and "
         "librknnrt.so in /usr/lib, nothing set",
    "E": "an RK3588 board with Rockchip's vendor kernel (/dev/dri/card1, driver rknpu); "
         "librknnrt.so is not installed",
}

#: the models whose outputs question 2 measures (one output, one output, three outputs)
_SIZE_MODELS = ("digits_cnn", "mobilenet_v2", "yolov5s")


# =========================================================================== question 1
def _scenario_truth() -> Dict[str, str]:
    from .. import board
    lib = "/usr/lib/librknnrt.so"
    vendor = dict(is_rockchip=True, soc="rk3588", machine="aarch64", npu_driver="rknpu",
                  npu_device="/dev/dri/card1", npu_device_nodes=["/dev/dri/card1"])
    boards = {
        "B": (board.BoardInfo(is_rockchip=True, soc="rk3588", machine="aarch64", npu_driver="rocket",
                              librknnrt_path=lib), {}),
        "C": (board.BoardInfo(librknnrt_path=lib, **vendor), {board.ENV_BACKEND: "sim"}),
        "D": (board.BoardInfo(librknnrt_path=lib, **vendor), {}),
        "E": (board.BoardInfo(**vendor), {}),
    }
    truth = {"A": board.choose_backend("auto")[0]}
    for key, (info, env) in boards.items():
        truth[key] = board.choose_backend("auto", board=info, env=env)[0]
    return truth


def check_backends(my_backends: Any) -> CheckResult:
    """Question 1: ``my_backends`` maps each letter of :data:`SCENARIOS` to "native" or "sim",
    the backend that ``auto`` picks there.  The check asks ``choose_backend`` itself."""
    def body() -> CheckResult:
        if not isinstance(my_backends, dict) or all(v is None for v in my_backends.values()):
            raise _not_done("my_backends is still empty.",
                            "give each letter of checks.SCENARIOS the backend \"native\" or \"sim\".")
        answers = {str(k).strip().upper(): (str(v).strip().lower() if v is not None else None)
                   for k, v in my_backends.items()}
        missing = [k for k in SCENARIOS if not answers.get(k)]
        if missing:
            raise _not_done(f"no backend yet for {', '.join(missing)}.",
                            "every letter of checks.SCENARIOS gets \"native\" or \"sim\".")
        odd = [f"{k}: {my_backends.get(k, answers[k])!r}" for k in SCENARIOS if answers[k] not in ("native", "sim")]
        if odd:
            raise _Fail(f"not a backend: {', '.join(odd)}.", "each answer is \"native\" or \"sim\".")
        truth = _scenario_truth()
        wrong = [k for k in SCENARIOS if answers[k] != truth[k]]
        if wrong:
            # not which: with two possible answers, naming the letter gives the answer away
            raise _Fail(f"{len(wrong)} of the {len(SCENARIOS)} backends {'differs' if len(wrong) == 1 else 'differ'} from what "
                        "rknnlab.board.choose_backend picks.",
                        "§1 says what the native backend needs, and which setting decides before "
                        "anything is looked at. Check each machine for both.")
        return CheckResult(Q1, "passed", f"All {len(SCENARIOS)} agree with rknnlab.board.choose_backend: "
                           f"this machine uses {truth['A']}.")

    return _LAB.run(Q1, body)


# =========================================================================== question 2
def _runtime_sizes(rt: Any, model: str, soc: str) -> Tuple[List[Tuple[int, int, int]], Dict[int, int]]:
    """[(output index, want_float, bytes)]: what a runtime-allocated rknn_outputs_get gives;
    and, per output, the bytes of its want_float = 1 values held as float16."""
    ctx = rt.init(_model_file(model, soc))
    try:
        frame = _frames(model, soc, n=1)[0]
        rt.inputs_set(ctx, [buffers.input_from_array(0, frame, fmt=abi.RKNN_TENSOR_NHWC,
                                                     type=abi.RKNN_TENSOR_UINT8)])
        rt.run(ctx)
        n_out = rt.query(ctx, abi.RKNN_QUERY_IN_OUT_NUM).n_output
        sizes, half = [], {}
        for wf in (0, 1):
            outs = [abi.rknn_output(index=k, want_float=wf, is_prealloc=0) for k in range(n_out)]
            rt.outputs_get(ctx, outs)
            sizes += [(int(o.index), wf, int(o.size)) for o in outs]
            if wf:
                half = {int(o.index): buffers.output_view(o, np.float32).astype(np.float16).nbytes
                        for o in outs}
            rt.outputs_release(ctx, outs)
        return sizes, half
    finally:
        rt.destroy(ctx)


def _float_twins(attr: Any, float_bytes: int, half_bytes: int) -> List[Tuple[str, Any, int, int]]:
    """The attr of the same output if the model gave it as float32 or float16, as a model
    compiled without quantizing its output would: (what it is, attr, bytes with want_float 0
    and 1).  Its size is that of the runtime's own float values, never a number typed here."""
    twins = []
    for name, rknn_type, own in (("float32", abi.RKNN_TENSOR_FLOAT32, float_bytes),
                                 ("float16", abi.RKNN_TENSOR_FLOAT16, half_bytes)):
        twin = abi.rknn_tensor_attr.from_buffer_copy(attr)
        twin.type, twin.size, twin.size_with_stride = rknn_type, own, own
        twin.qnt_type, twin.zp, twin.scale = abi.RKNN_TENSOR_QNT_NONE, 0, 1.0
        twins.append((name, twin, own, float_bytes))
    return twins


def check_output_bytes(output_bytes: Any) -> CheckResult:
    """Question 2: ``output_bytes(attr, want_float)`` returns the bytes of output ``attr``
    (from ``RKNN_QUERY_OUTPUT_ATTR``) as ``rknn_outputs_get`` gives it with ``want_float``
    0 or 1.  The check compares it with the size the runtime reports for its own buffer, for
    every output of three models (one with three outputs of different shapes).  Every course
    model's outputs are int8, so each output also comes as a float32 and a float16 twin (see
    :func:`_float_twins`): their sizes are those of the runtime's own float values."""
    def body() -> CheckResult:
        if not callable(output_bytes):
            raise _not_done(f"expected your output_bytes function, got {type(output_bytes).__name__}.",
                            "pass the function itself: checks.check_output_bytes(output_bytes)")
        from .. import models
        rt = _open_runtime()
        soc = _current_soc()
        problems, checked = [], 0
        for model in (m for m in _SIZE_MODELS if soc in models.model_socs(m)):
            ctx = rt.init(_model_file(model, soc))
            try:
                sizes, half = _runtime_sizes(rt, model, soc)
                cases = []
                for index, wf, want in sizes:
                    attr = rt.query(ctx, abi.RKNN_QUERY_OUTPUT_ATTR, abi.rknn_tensor_attr(index=index))
                    cases.append((f"attr of {model} output {index}", attr, wf, want))
                    if wf:
                        for kind, twin, own, as_float in _float_twins(attr, want, half[index]):
                            label = f"attr of {model} output {index} as a {kind} output"
                            cases += [(label, twin, 0, own), (label, twin, 1, as_float)]
            finally:
                rt.destroy(ctx)
            for label, attr, wf, want in cases:
                call = f"output_bytes({label}, want_float={wf})"
                try:
                    got = output_bytes(attr, wf)
                except Exception as exc:
                    raise _student_error(exc, call, "read the attr's fields: §2 says which one "
                                         "counts bytes, and what want_float changes.")
                if got is None:
                    raise _not_done("output_bytes returned None.", "return a number of bytes (an int).")
                value = _whole_number(got)
                if value is None:
                    raise _Fail(f"{call} returned {got!r}, not a whole number of bytes.",
                                "return an int.")
                checked += 1
                if value != want:
                    problems.append(f"{call}: your {value:,} B is "
                                    f"{'too large' if value > want else 'too small'}")
        if problems:
            raise _Fail(f"{len(problems)} of {checked} sizes differ from the size the runtime gives "
                        f"({getattr(rt, 'source', soc)}).",
                        "want_float = 0 gives the output in its own type, which is not always int8 "
                        "(attr.type); want_float = 1 gives float32. Which field of the attr counts "
                        "elements, and which counts bytes?",
                        problems[:4] + ([f"... and {len(problems) - 4} more"] if len(problems) > 4 else []))
        return CheckResult(Q2, "passed", f"All {checked} sizes agree with the runtime's outputs "
                           f"({getattr(rt, 'source', soc)}), int8, float32 and float16.")

    return _LAB.run(Q2, body)


# =========================================================================== question 3
LEAKS, NO_LEAK, CANNOT_TELL = "leaks", "no leak", "cannot tell"
#: the answers ``leak_verdict`` may give
ANSWERS = (LEAKS, NO_LEAK, CANNOT_TELL)

#: what each made-up variant of a mystery run is: (leak in bytes per iteration, extra RSS in
#: kB from start-up, MemFree drift over the loop in MiB, noise of the heap in MiB, the right
#: answer, the trap it sets, in words)
_KINDS = (
    (12_000, 0, 0, 0, LEAKS, "a variant whose heap and RSS grow steadily"),
    (30_000, 0, +400, 0, LEAKS, "a variant whose heap and RSS grow while MemFree rises by 400 MiB"),
    (300, 0, 0, 0, LEAKS, "a variant whose heap grows by a few hundred bytes per iteration, "
                          "too little for RSS to see in this run"),
    (0, 0, 0, 0, NO_LEAK, "a variant whose heap rises by a few dozen bytes per iteration, "
                          "within the floor of its run"),
    (0, 0, -400, 0, NO_LEAK, "a variant whose MemFree falls by 400 MiB while its heap and RSS stay flat"),
    (0, 200 * 1024, 0, 0, NO_LEAK, "a variant with the highest peak RSS (200 MiB more from start-up), "
                                   "flat during the loop"),
    (1_000, 0, 0, 3, CANNOT_TELL, "a noisy variant whose heap slope is large but whose interval "
                                  "includes 0"),
)
_ITERATIONS = 1200
_SAMPLES = 400
#: a noisy variant is kept only when its heap slope is above this and its interval includes 0
_NOISY_SLOPE = 1_000


def _made_up_run(rng: np.random.Generator, name: str, leak: int, rss_extra_kb: int,
                 memfree_mib: int, noise_mib: float = 0) -> Any:
    """One variant's raw columns, shaped like a simulator run of the harness.  ``noise_mib``:
    the heap (and RSS) also sits on a level that jumps to a new random height, up to that
    many MiB, every 40 to 160 iterations (a cache that fills and empties)."""
    from ..experiment.result import VariantRun
    n, its = _SAMPLES, _ITERATIONS
    iteration = np.linspace(0, its - 1, n).round().astype(int)
    t_ns = (1.5e9 + iteration * 2.8e6 + rng.normal(0, 2e5, n)).astype(np.int64)
    floor = 30.0 * iteration + 16 * rng.integers(0, 4, n)  # what the harness adds (glibc's caches)
    transient = rng.choice([0, 0, 0, 4096, 65536, 262144], n)  # a sample that lands during a get
    level = np.zeros(n)
    if noise_mib:
        starts = np.cumsum(rng.integers(40, 160, its // 40))
        heights = rng.uniform(0, noise_mib * 2 ** 20, len(starts) + 1)
        level = heights[np.searchsorted(starts, iteration, side="right")]
    heap = 3_000_000 + floor + leak * iteration + transient + level
    rss_kb = (125_000 + rss_extra_kb + 4 * np.floor((leak * iteration + level) / 4096)
              + rng.choice([0, 0, 4, 8, 132, 264], n))
    mem_free_kb = (6_000_000 + np.cumsum(rng.normal(0, 1500, n))
                   + memfree_mib * 1024 * iteration / (its - 1))
    iters = np.arange(its)
    samples = {"t_ns": t_ns.tolist(), "iteration": iteration.tolist(), "stage": ["measure"] * n,
               "rss_kb": rss_kb.tolist(), "mem_free_kb": mem_free_kb.round().tolist(),
               "heap_in_use_bytes": heap.round().tolist()}
    iterations = {"iteration": iters.tolist(), "stage": ["measure"] * its,
                  "t_start_ns": (1.5e9 + iters * 2.8e6).astype(np.int64).tolist(),
                  "duration_ns": rng.normal(2.8e6, 1e5, its).astype(np.int64).tolist()}
    return VariantRun(name=name, status="ok", samples=samples, iterations=iterations)


def _noisy_run(rng: np.random.Generator, name: str, leak: int, rss_extra_kb: int,
               memfree_mib: int, noise_mib: float) -> Any:
    """A noisy variant that no rule can decide: drawn again until its heap slope is above
    ``_NOISY_SLOPE`` and the 95% interval around it still includes 0."""
    from ..experiment.growth import HEAP_RESOLUTION, HEAP_STEP, growth
    for _ in range(1000):  # about one draw in four is kept
        run = _made_up_run(rng, name, leak, rss_extra_kb, memfree_mib, noise_mib)
        g = growth(run.samples["iteration"], run.samples["heap_in_use_bytes"],
                   HEAP_STEP, HEAP_RESOLUTION)
        if g.slope > _NOISY_SLOPE and g.slope - g.half_width < 0:
            return run
    raise RuntimeError("no undecidable noisy run in 1,000 draws: the noise of _KINDS is too small")


def mystery_run(seed: Optional[int] = None) -> Any:
    """A made-up run (a ``Result``) of seven variants named V1 ... V7 in a random order, like
    those question 3's check hands to ``leak_verdict``.  The answer for each stays inside the check."""
    return _mystery(seed)[0]


def _mystery(seed: Optional[int]) -> Tuple[Any, Dict[str, str], Dict[str, str]]:
    from ..experiment.result import Result
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(_KINDS))
    runs, traps, truth = [], {}, {}
    for k, kind in enumerate(order):
        leak, rss_extra, drift, noise, answer, trap = _KINDS[kind]
        name = f"V{k + 1}"
        make = _noisy_run if noise else _made_up_run
        runs.append(make(rng, name, leak, rss_extra, drift, noise))
        traps[name], truth[name] = trap, answer
    meta = {"source": "made up by rknnlab.checks.ch00 (no runtime ran)", "backend": "none",
            "parameters": {"iterations": _ITERATIONS, "warmup": 0}}
    return Result(meta, runs), traps, truth


def check_leak_verdicts(leak_verdict: Any, draws: int = 3) -> CheckResult:
    """Question 3: ``leak_verdict(result, variant)`` says whether ``variant`` of ``result``
    leaks: "leaks", "no leak" or "cannot tell".  The check hands it made-up runs
    (:func:`mystery_run`) whose variants it built with a leak (large or small), none, or so
    much noise that no rule can decide, under new names each time, and counts the wrong answers."""
    def body() -> CheckResult:
        if not callable(leak_verdict):
            raise _not_done(f"expected your leak_verdict function, got {type(leak_verdict).__name__}.",
                            "pass the function itself: checks.check_leak_verdicts(leak_verdict)")
        wrong: Dict[str, Tuple[str, str]] = {}
        total = 0
        for seed in random.sample(range(1_000_000), draws):
            result, traps, truth = _mystery(seed)
            for name in result.variants:
                try:
                    got = leak_verdict(result, name)
                except Exception as exc:
                    raise _student_error(exc, f"leak_verdict(result, {name!r})",
                                         "read the variant's row of result.summary (§4).")
                if got is None:
                    raise _not_done("leak_verdict returned None.",
                                    'return "leaks", "no leak" or "cannot tell".')
                said = got.strip().lower() if isinstance(got, str) else None
                if said not in ANSWERS:
                    raise _Fail(f"leak_verdict(result, {name!r}) returned {got!r}.",
                                'return one of "leaks", "no leak" or "cannot tell".')
                total += 1
                if said != truth[name]:
                    s = result.summary.loc[name]
                    wrong.setdefault(traps[name], (f"heap slope {s['heap_slope_bytes_per_iter']:+,.0f} ± "
                                                   f"{s['heap_slope_pm_bytes']:,.0f} B/iteration, RSS "
                                                   f"{s['rss_verdict']}, MemFree first - last "
                                                   f"{s['memfree_drop_kb'] / 1024:+,.0f} MiB, "
                                                   f"peak RSS {s['rss_peak_kb'] / 1024:,.0f} MiB", said))
        if wrong:
            details = [f"{trap} ({facts}): your function says {said!r}"
                       for trap, (facts, said) in wrong.items()]
            raise _Fail(f"{len(wrong)} of the {len(_KINDS)} kinds of variant got a wrong answer, "
                        f"over {total} variants in {draws} made-up runs.",
                        "§4's rule: a leak is a steady slope of the process's own memory, judged with "
                        "its interval; not a peak, and not MemFree. The heap counts bytes, RSS whole "
                        "pages. An interval too wide to decide means \"cannot tell\".", details)
        return CheckResult(Q3, "passed", f"All {total} answers are right ({draws} made-up runs, "
                           f"{len(_KINDS)} kinds of variant, new names each time).")

    return _LAB.run(Q3, body)


summary = _LAB.summary
results = _LAB.results
_LAB.seal(globals(), {"check_backends": Q1, "check_output_bytes": Q2, "check_leak_verdicts": Q3})
