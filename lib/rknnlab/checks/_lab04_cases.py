"""The variants Lab 4's checks hand to the student: private (import them from nowhere).

They carry no docstrings and neutral names on purpose: help() and __name__ must not give
the answer away.  The harness imports them by name in the variant's process, so they are
module-level functions; what each one does is decided here, not in a table the notebook
can read.
"""
from __future__ import annotations

import os
from typing import Any, Callable, Dict, List

import numpy as np

from ..experiment.variants import frame_input, query_io
from ..i18n import pick as L
from ..rknn import abi


def _get_release(lab: Any, want_float: int = 1, release: bool = True) -> None:
    rt = lab.rt
    ctx = rt.init(lab.model_path)
    _, attrs = query_io(rt, ctx)
    for i in lab.loop():
        rt.inputs_set(ctx, frame_input(lab.input(i)))
        rt.run(ctx)
        outs = [abi.rknn_output(index=a.index, want_float=want_float, is_prealloc=0) for a in attrs]
        rt.outputs_get(ctx, outs)
        if release:
            rt.outputs_release(ctx, outs)
    rt.destroy(ctx)


def _buffers(attrs: List[abi.rknn_tensor_attr], want_float: int) -> List[np.ndarray]:
    return [np.empty(a.n_elems, np.float32) if want_float else np.empty(a.size, np.int8) for a in attrs]


def _outs(attrs: List[abi.rknn_tensor_attr], bufs: List[np.ndarray], want_float: int) -> List[abi.rknn_output]:
    return [abi.rknn_output(index=a.index, want_float=want_float, is_prealloc=1, buf=b.ctypes.data,
                            size=b.nbytes) for a, b in zip(attrs, bufs)]


def _prealloc(lab: Any, want_float: int = 1, copies: int = 1, fresh_each_iteration: bool = False) -> None:
    rt = lab.rt
    ctx = rt.init(lab.model_path)
    _, attrs = query_io(rt, ctx)
    sets = [_buffers(attrs, want_float) for _ in range(copies)]
    for i in lab.loop():
        if fresh_each_iteration:
            sets[0] = _buffers(attrs, want_float)
        outs = _outs(attrs, sets[i % copies], want_float)
        rt.inputs_set(ctx, frame_input(lab.input(i)))
        rt.run(ctx)
        rt.outputs_get(ctx, outs)
        rt.outputs_release(ctx, outs)
    rt.destroy(ctx)


def _zero_copy(lab: Any) -> None:
    from ..experiment import variants
    variants.zero_copy_io(lab)


_PLAY: Dict[str, Callable[[Any], None]] = {
    "leak": lambda lab: _get_release(lab, release=False),
    "release": lambda lab: _get_release(lab),
    "prealloc": lambda lab: _prealloc(lab),
    "prealloc_int8": lambda lab: _prealloc(lab, want_float=0),
    "double_buffer": lambda lab: _prealloc(lab, copies=2),
    "fresh_prealloc": lambda lab: _prealloc(lab, fresh_each_iteration=True),
    "zero_copy": _zero_copy,
}


# --------------------------------------------------------------------------- exercise 4
def _mystery_order() -> List[str]:
    """Exercise 4's behaviours for A, B, C, D: one of each kind, in a seeded order."""
    kinds = ["leak", "release", "prealloc", "fresh_prealloc"]
    return [kinds[int(i)] for i in np.random.default_rng(4_0404).permutation(len(kinds))]


def mystery_A(lab: Any) -> None:
    _PLAY[_mystery_order()[0]](lab)


def mystery_B(lab: Any) -> None:
    _PLAY[_mystery_order()[1]](lab)


def mystery_C(lab: Any) -> None:
    _PLAY[_mystery_order()[2]](lab)


def mystery_D(lab: Any) -> None:
    _PLAY[_mystery_order()[3]](lab)


#: the kind case_x plays, drawn by exercise 4's check for each check and passed to the
#: variant's process in the environment (so no fixed answer fits it)
CASE_X_ENV = "RKNNLAB_CHECKS_CASE_X"
CASE_X_KINDS = ("leak", "release", "prealloc", "prealloc_int8", "fresh_prealloc")


def case_x(lab: Any) -> None:
    _PLAY[os.environ.get(CASE_X_ENV, "leak")](lab)


def which_cases() -> List[Callable[[Any], None]]:
    """What exercise 4's check hands to classify(): the four letters and one variant more."""
    return [mystery_A, mystery_B, mystery_C, mystery_D, case_x]


def which_truth(case: Callable[[Any], None]) -> str:
    """"leak", "release", "prealloc" or "fresh": for the check only."""
    kinds = dict(zip([mystery_A, mystery_B, mystery_C, mystery_D], _mystery_order()))
    kinds[case_x] = os.environ.get(CASE_X_ENV, "leak")
    return kinds[case].split("_")[0]


# --------------------------------------------------------------------------- exercise 5 ★
def case_k(lab: Any) -> None:
    _PLAY["release"](lab)


def case_m(lab: Any) -> None:
    _PLAY["prealloc"](lab)


def case_p(lab: Any) -> None:
    _PLAY["leak"](lab)


def case_r(lab: Any) -> None:
    _PLAY["zero_copy"](lab)


def case_t(lab: Any) -> None:
    _PLAY["fresh_prealloc"](lab)


def case_w(lab: Any) -> None:
    _PLAY["double_buffer"](lab)


def reuse_cases() -> List[Callable[[Any], None]]:
    return [case_k, case_m, case_p, case_r, case_t, case_w]


def reuse_truth(case: Callable[[Any], None]) -> bool:
    return {case_k: False, case_m: True, case_p: False, case_r: True, case_t: False, case_w: True}[case]


def reuse_why(case: Callable[[Any], None]) -> str:
    """What the case does, said only after the student's answer for it was right."""
    if case is case_k:
        return L("allocates inside every rknn_outputs_get and frees it in the paired release (flat RSS, "
                 "and malloc may hand back the same address)",
                 "在每次 rknn_outputs_get 内部分配，并在配对的 release 中释放（RSS 平稳，"
                 "malloc 也可能返回同一个地址）")
    if case is case_m:
        return L("uses one caller-owned buffer (is_prealloc = 1), each get paired with a release",
                 "使用一个调用方拥有的缓冲区（is_prealloc = 1），每次 get 都与一次 release 配对")
    if case is case_p:
        return L("allocates inside every get and never releases",
                 "在每次 get 内部分配，且从不 release")
    if case is case_r:
        return L("binds zero-copy memory once and makes no rknn_outputs_get at all",
                 "只绑定一次零拷贝内存，完全不调用 rknn_outputs_get")
    if case is case_t:
        return L("sets is_prealloc = 1, but into a buffer allocated anew every iteration",
                 "设置了 is_prealloc = 1，但写入的是每次迭代重新分配的缓冲区")
    if case is case_w:
        return L("uses two caller-owned buffers in turn, both allocated once",
                 "轮流使用两个调用方拥有的缓冲区，两者都只分配一次")
    raise KeyError(case)
