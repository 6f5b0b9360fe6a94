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
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from ..i18n import Texts, pick as L
from ..rknn import abi, buffers
from ._core import (CheckResult, Lab, _Fail, _current_soc, _frames, _model_file, _not_done,
                    _open_runtime, _student_error, _whole_number)

__all__ = ["CheckResult", "check_backends", "check_output_bytes", "check_leak_verdicts",
           "summary", "results", "SCENARIOS", "ANSWERS", "mystery_run"]

# the titles are the results' keys; their Chinese is registered with Lab(zh=)
Q1 = "Question 1 — which backend auto picks"  # en-only: a key, translated in zh=
Q2 = "Question 2 — the bytes of an output"  # en-only: a key, translated in zh=
Q3 = "Question 3 — does it leak?"  # en-only: a key, translated in zh=

_LAB = Lab("Chapter 0 self-check", [Q1, Q2, Q3],
           zh=("第 0 章自检", ["问题 1 — auto 选择哪个后端", "问题 2 — 一个输出的字节数",
                              "问题 3 — 它泄漏吗？"]))




#: the machines of question 1 (the check asks rknnlab.board.choose_backend about each)
SCENARIOS: Mapping = Texts({
    "A": lambda: L("this machine, as the notebook runs now", "这台机器，即本笔记本现在运行的环境"),
    "B": lambda: L("an RK3588 board with librknnrt.so in /usr/lib and a mainline kernel: its NPU driver is "
                   "'rocket' (/dev/accel/accel0), there is no rknpu device node",
                   "一块 RK3588 开发板，librknnrt.so 位于 /usr/lib，使用主线内核：它的 NPU 驱动是 "
                   "'rocket'（/dev/accel/accel0），没有 rknpu 设备节点"),
    "C": lambda: L("an RK3588 board with Rockchip's vendor kernel (/dev/dri/card1, driver rknpu) and "
                   "librknnrt.so in /usr/lib, where RKNNLAB_BACKEND=sim is set",
                   "一块 RK3588 开发板，使用 Rockchip 的厂商内核（/dev/dri/card1，驱动为 rknpu），"
                   "librknnrt.so 位于 /usr/lib，并且设置了 RKNNLAB_BACKEND=sim"),
    "D": lambda: L("an RK3588 board with Rockchip's vendor kernel (/dev/dri/card1, driver rknpu) and "
                   "librknnrt.so in /usr/lib, nothing set",
                   "一块 RK3588 开发板，使用 Rockchip 的厂商内核（/dev/dri/card1，驱动为 rknpu），"
                   "librknnrt.so 位于 /usr/lib，没有设置任何东西"),
    "E": lambda: L("an RK3588 board with Rockchip's vendor kernel (/dev/dri/card1, driver rknpu); "
                   "librknnrt.so is not installed",
                   "一块 RK3588 开发板，使用 Rockchip 的厂商内核（/dev/dri/card1，驱动为 rknpu）；"
                   "没有安装 librknnrt.so"),
})

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
            raise _not_done(L("my_backends is still empty.", "my_backends 还是空的。"),
                            L("give each letter of checks.SCENARIOS the backend \"native\" or \"sim\".",
                              "为 checks.SCENARIOS 的每个字母填上后端 \"native\" 或 \"sim\"。"))
        answers = {str(k).strip().upper(): (str(v).strip().lower() if v is not None else None)
                   for k, v in my_backends.items()}
        missing = [k for k in SCENARIOS if not answers.get(k)]
        if missing:
            raise _not_done(L(f"no backend yet for {', '.join(missing)}.",
                              f"{'、'.join(missing)} 还没有填后端。"),
                            L("every letter of checks.SCENARIOS gets \"native\" or \"sim\".",
                              "checks.SCENARIOS 的每个字母都要填 \"native\" 或 \"sim\"。"))
        odd = [f"{k}: {my_backends.get(k, answers[k])!r}" for k in SCENARIOS if answers[k] not in ("native", "sim")]
        if odd:
            raise _Fail(L(f"not a backend: {', '.join(odd)}.", f"不是后端：{'；'.join(odd)}。"),
                        L("each answer is \"native\" or \"sim\".", "每个答案只能是 \"native\" 或 \"sim\"。"))
        truth = _scenario_truth()
        wrong = [k for k in SCENARIOS if answers[k] != truth[k]]
        if wrong:
            # not which: with two possible answers, naming the letter gives the answer away
            raise _Fail(L(f"{len(wrong)} of the {len(SCENARIOS)} backends {'differs' if len(wrong) == 1 else 'differ'} "
                          "from what rknnlab.board.choose_backend picks.",
                          f"{len(SCENARIOS)} 个后端中有 {len(wrong)} 个与 rknnlab.board.choose_backend "
                          "的选择不同。"),
                        L("§1 says what the native backend needs, and which setting decides before "
                          "anything is looked at. Check each machine for both.",
                          "§1 说明了原生后端需要什么，以及哪个设置在查看任何东西之前就作出决定。"
                          "对每台机器，这两点都要核对。"))
        return CheckResult(Q1, "passed", L(f"All {len(SCENARIOS)} agree with rknnlab.board.choose_backend: "
                                           f"this machine uses {truth['A']}.",
                                           f"全部 {len(SCENARIOS)} 个都与 rknnlab.board.choose_backend 一致："
                                           f"这台机器使用 {truth['A']}。"))

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
            raise _not_done(L(f"expected your output_bytes function, got {type(output_bytes).__name__}.",
                              f"这里要的是你的 output_bytes 函数，收到的是 {type(output_bytes).__name__}。"),
                            L("pass the function itself: checks.check_output_bytes(output_bytes)",
                              "请传入函数本身：checks.check_output_bytes(output_bytes)"))
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
                    cases.append((L(f"attr of {model} output {index}", f"{model} 输出 {index} 的 attr"),
                                  attr, wf, want))
                    if wf:
                        for kind, twin, own, as_float in _float_twins(attr, want, half[index]):
                            label = L(f"attr of {model} output {index} as a {kind} output",
                                      f"{model} 输出 {index} 作为 {kind} 输出时的 attr")
                            cases += [(label, twin, 0, own), (label, twin, 1, as_float)]
            finally:
                rt.destroy(ctx)
            for label, attr, wf, want in cases:
                call = f"output_bytes({label}, want_float={wf})"
                try:
                    got = output_bytes(attr, wf)
                except Exception as exc:
                    raise _student_error(exc, call, L("read the attr's fields: §2 says which one "
                                                      "counts bytes, and what want_float changes.",
                                                      "读一读 attr 的各个字段：§2 说明了哪个字段以字节计，"
                                                      "以及 want_float 会改变什么。"))
                if got is None:
                    raise _not_done(L("output_bytes returned None.", "output_bytes 返回了 None。"),
                                    L("return a number of bytes (an int).", "请返回一个字节数（int）。"))
                value = _whole_number(got)
                if value is None:
                    raise _Fail(L(f"{call} returned {got!r}, not a whole number of bytes.",
                                  f"{call} 返回了 {got!r}，不是整数个字节。"),
                                L("return an int.", "请返回一个 int。"))
                checked += 1
                if value != want:
                    problems.append(L(f"{call}: your {value:,} B is "
                                      f"{'too large' if value > want else 'too small'}",
                                      f"{call}：你的 {value:,} B {'偏大' if value > want else '偏小'}"))
        if problems:
            raise _Fail(L(f"{len(problems)} of {checked} sizes differ from the size the runtime gives "
                          f"({getattr(rt, 'source', soc)}).",
                          f"{checked} 个大小中有 {len(problems)} 个与运行时给出的大小不同"
                          f"（{getattr(rt, 'source', soc)}）。"),
                        L("want_float = 0 gives the output in its own type, which is not always int8 "
                          "(attr.type); want_float = 1 gives float32. Which field of the attr counts "
                          "elements, and which counts bytes?",
                          "want_float = 0 时，输出采用它自己的类型，而这不一定是 int8（attr.type）；"
                          "want_float = 1 时输出 float32。attr 的哪个字段计元素个数，哪个字段计字节数？"),
                        problems[:4] + ([L(f"... and {len(problems) - 4} more",
                                           f"……另外还有 {len(problems) - 4} 个")] if len(problems) > 4 else []))
        return CheckResult(Q2, "passed", L(f"All {checked} sizes agree with the runtime's outputs "
                                           f"({getattr(rt, 'source', soc)}), int8, float32 and float16.",
                                           f"全部 {checked} 个大小都与运行时的输出一致"
                                           f"（{getattr(rt, 'source', soc)}），int8、float32 和 float16 都包括在内。"))

    return _LAB.run(Q2, body)


# =========================================================================== question 3
LEAKS, NO_LEAK, CANNOT_TELL = "leaks", "no leak", "cannot tell"
#: the answers ``leak_verdict`` may give
ANSWERS = (LEAKS, NO_LEAK, CANNOT_TELL)

#: what each made-up variant of a mystery run is: (leak in bytes per iteration, extra RSS in
#: kB from start-up, MemFree drift over the loop in MiB, noise of the heap in MiB, the right
#: answer, the trap it sets, in words: said when the check runs, in the language of the moment)
_KINDS: Tuple[Tuple[int, int, int, float, str, Callable[[], str]], ...] = (
    (12_000, 0, 0, 0, LEAKS, lambda: L("a variant whose heap and RSS grow steadily",
                                       "一个堆和 RSS 都稳定增长的变体")),
    (30_000, 0, +400, 0, LEAKS, lambda: L("a variant whose heap and RSS grow while MemFree rises by 400 MiB",
                                          "一个堆和 RSS 增长、同时 MemFree 上升 400 MiB 的变体")),
    (300, 0, 0, 0, LEAKS, lambda: L("a variant whose heap grows by a few hundred bytes per iteration, "
                                    "too little for RSS to see in this run",
                                    "一个堆每次迭代增长几百字节的变体，增长太少，这次运行中 RSS 看不出来")),
    (0, 0, 0, 0, NO_LEAK, lambda: L("a variant whose heap rises by a few dozen bytes per iteration, "
                                    "within the floor of its run",
                                    "一个堆每次迭代上升几十字节的变体，没有超出它这次运行的分辨下限")),
    (0, 0, -400, 0, NO_LEAK, lambda: L("a variant whose MemFree falls by 400 MiB while its heap and RSS stay flat",
                                       "一个 MemFree 下降 400 MiB、而堆和 RSS 保持平稳的变体")),
    (0, 200 * 1024, 0, 0, NO_LEAK, lambda: L("a variant with the highest peak RSS (200 MiB more from start-up), "
                                             "flat during the loop",
                                             "一个峰值 RSS 最高（启动阶段多出 200 MiB）、在循环期间保持平稳的变体")),
    (1_000, 0, 0, 3, CANNOT_TELL, lambda: L("a noisy variant whose heap slope is large but whose interval "
                                            "includes 0",
                                            "一个噪声很大的变体：堆的斜率很大，但它的区间包含 0")),
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
    raise RuntimeError("no undecidable noisy run in 1,000 draws: the noise of _KINDS is too small")  # en-only


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
        traps[name], truth[name] = trap(), answer
    meta = {"source": L("made up by rknnlab.checks.ch00 (no runtime ran)",
                        "由 rknnlab.checks.ch00 构造（没有运行任何运行时）"), "backend": "none",
            "parameters": {"iterations": _ITERATIONS, "warmup": 0}}
    return Result(meta, runs), traps, truth


def check_leak_verdicts(leak_verdict: Any, draws: int = 3) -> CheckResult:
    """Question 3: ``leak_verdict(result, variant)`` says whether ``variant`` of ``result``
    leaks: "leaks", "no leak" or "cannot tell".  The check hands it made-up runs
    (:func:`mystery_run`) whose variants it built with a leak (large or small), none, or so
    much noise that no rule can decide, under new names each time, and counts the wrong answers."""
    def body() -> CheckResult:
        if not callable(leak_verdict):
            raise _not_done(L(f"expected your leak_verdict function, got {type(leak_verdict).__name__}.",
                              f"这里要的是你的 leak_verdict 函数，收到的是 {type(leak_verdict).__name__}。"),
                            L("pass the function itself: checks.check_leak_verdicts(leak_verdict)",
                              "请传入函数本身：checks.check_leak_verdicts(leak_verdict)"))
        wrong: Dict[str, Tuple[str, str]] = {}
        total = 0
        for seed in random.sample(range(1_000_000), draws):
            result, traps, truth = _mystery(seed)
            for name in result.variants:
                try:
                    got = leak_verdict(result, name)
                except Exception as exc:
                    raise _student_error(exc, f"leak_verdict(result, {name!r})",
                                         L("read the variant's row of result.summary (§4).",
                                           "读一读这个变体在 result.summary 中的那一行（§4）。"))
                if got is None:
                    raise _not_done(L("leak_verdict returned None.", "leak_verdict 返回了 None。"),
                                    L('return "leaks", "no leak" or "cannot tell".',
                                      '请返回 "leaks"、"no leak" 或 "cannot tell"。'))
                said = got.strip().lower() if isinstance(got, str) else None
                if said not in ANSWERS:
                    raise _Fail(L(f"leak_verdict(result, {name!r}) returned {got!r}.",
                                  f"leak_verdict(result, {name!r}) 返回了 {got!r}。"),
                                L('return one of "leaks", "no leak" or "cannot tell".',
                                  '请返回 "leaks"、"no leak"、"cannot tell" 三者之一。'))
                total += 1
                if said != truth[name]:
                    s = result.summary.loc[name]
                    wrong.setdefault(traps[name], (L(f"heap slope {s['heap_slope_bytes_per_iter']:+,.0f} ± "
                                                     f"{s['heap_slope_pm_bytes']:,.0f} B/iteration, RSS "
                                                     f"{s['rss_verdict']}, MemFree first - last "
                                                     f"{s['memfree_drop_kb'] / 1024:+,.0f} MiB, "
                                                     f"peak RSS {s['rss_peak_kb'] / 1024:,.0f} MiB",
                                                     f"堆的斜率 {s['heap_slope_bytes_per_iter']:+,.0f} ± "
                                                     f"{s['heap_slope_pm_bytes']:,.0f} B/次迭代，RSS 判定为 "
                                                     f"{s['rss_verdict']}，MemFree 首值 − 末值 "
                                                     f"{s['memfree_drop_kb'] / 1024:+,.0f} MiB，"
                                                     f"峰值 RSS {s['rss_peak_kb'] / 1024:,.0f} MiB"), said))
        if wrong:
            details = [L(f"{trap} ({facts}): your function says {said!r}",
                         f"{trap}（{facts}）：你的函数给出 {said!r}")
                       for trap, (facts, said) in wrong.items()]
            raise _Fail(L(f"{len(wrong)} of the {len(_KINDS)} kinds of variant got a wrong answer, "
                          f"over {total} variants in {draws} made-up runs.",
                          f"{len(_KINDS)} 类变体中有 {len(wrong)} 类得到了错误的答案"
                          f"（{draws} 次构造的运行，共 {total} 个变体）。"),
                        L("§4's rule: a leak is a steady slope of the process's own memory, judged with "
                          "its interval; not a peak, and not MemFree. The heap counts bytes, RSS whole "
                          "pages. An interval too wide to decide means \"cannot tell\".",
                          "§4 的规则：泄漏是进程自身内存的稳定斜率，要结合它的区间来判断；"
                          "不看峰值，也不看 MemFree。堆按字节计数，RSS 按整页计数。"
                          "区间太宽、无法作出判断时，答案是 \"cannot tell\"。"), details)
        return CheckResult(Q3, "passed", L(f"All {total} answers are right ({draws} made-up runs, "
                                           f"{len(_KINDS)} kinds of variant, new names each time).",
                                           f"全部 {total} 个答案都正确（{draws} 次构造的运行，"
                                           f"{len(_KINDS)} 类变体，每次都用新名称）。"))

    return _LAB.run(Q3, body)


summary = _LAB.summary
results = _LAB.results
_LAB.seal(globals(), {"check_backends": Q1, "check_output_bytes": Q2, "check_leak_verdicts": Q3})
