"""Every RKNN error code (-1 ... -13): what it means, what triggers it, the message the
course's binding gives, and what to check.

An error code names a kind of problem, not its cause. Each row says what the API reference's
table means by the code (in our words), what is documented or publicly reported to trigger it
(with the issue thread), and the exact call that produced it here, on the simulator. Codes the
simulator cannot produce honestly (it has no NPU job, no driver, no device) are "board only",
with the reason; their message is the one rknnlab.rknn.errors.error_for would give, marked
"[not reproduced]".

- :func:`error_codes` -> :class:`ErrorTable` (text <= 15 lines, HTML table, ``.row(code)``,
  ``.show(columns)``, ``.frame``);
- :func:`reproduce_error` -> the RknnError the trigger really raised.

The reproductions always run on the simulator (rknnlab.sim.SimRuntime), also when a board's
runtime is passed: some of these calls (a context of 0, 1 PiB of memory) are not for a
student's board.
"""
from __future__ import annotations

import html
import textwrap
from dataclasses import dataclass, fields
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from .. import models
from ..rknn import abi, buffers, errors

#: the codes the API reference and rknn_api.h define (0 is success)
CODES = tuple(range(-1, -14, -1))

#: width and height limits of the text display
_WIDTH, _LINES = 100, 15

_LOG = "RKNN_LOG_LEVEL=4 log"


@dataclass(frozen=True)
class _Code:
    """What the course knows about one code: the documents and public logs."""
    meaning: str          # the API reference's table, paraphrased
    trigger: str          # documented or public evidence, cited
    check: str            # what to look at, in order
    check_short: str      # the same for the 100-column text
    function: str         # the C function a board returns it from (for board-only messages)
    board_only: str = ""  # why the simulator cannot produce it ("" if it can)


_CODES: Dict[int, _Code] = {
    -1: _Code(
        "The call failed and no more specific code applies.",
        "At rknn_run on a board: 'failed to submit' (an NPU job failed) with rknn_run returning -1: "
        "airockchip/rknn-toolkit2#554 (zero-copy, librknnrt 2.3.2), #447 (2.3.2), "
        "rockchip-linux/rknn-toolkit2#320 (first Conv, multi-core: fixed by a driver update), "
        "airockchip/rknn-toolkit2#531 (two threads on one context, #533). The User Guide V2.3.0 "
        "(§10.9) gives two causes: in the first conv with zero-copy, an undersized input (A62); in "
        "a later layer, a model or toolchain problem (update rknn-toolkit2 and librknnrt). At "
        "rknn_init: 'failed to open rknn device', whether no rknpu driver is loaded or the user "
        "cannot open the device node (airockchip/rknn-toolkit2#68, rockchip-linux/rknn-toolkit2#49, "
        "#244); older runtimes also return -1 for a model from a newer toolkit "
        "(airockchip/rknn_model_zoo#149) or for another SoC (rockchip-linux/rknpu2#25).",
        f"the {_LOG} (which op failed to submit, or the device it could not open); dmesg | grep -i "
        "rknpu; every bound mem holds its attr's size_with_stride; one thread per context; "
        "`python -m rknnlab doctor` (device, driver, runtime and toolkit versions)",
        "log: op or device; dmesg; sizes; doctor",
        "rknn_run",
        "the simulator has no NPU job that can fail to submit, and refuses an undersized mem at "
        "the bind (A62)"),
    -2: _Code(
        "The NPU did not finish within the time allowed.",
        "A blocking rknn_run whose NPU job does not finish within the driver's time limit. The "
        "application does not set that limit: rknn_run's extend argument is unused (the API "
        "reference: pass NULL; rknn_run_extend is 'not available currently'). A hung or reset NPU "
        "leaves rknpu 'failed to wait job' / 'job abort' lines in dmesg "
        "(airockchip/rknn-toolkit2#536, return code not shown). No public log with -2 itself was found.",
        "dmesg | grep -i rknpu (job timeout, reset); the NPU load (/sys/kernel/debug/rknpu/load); "
        f"how many contexts run at once; the {_LOG} (the op running)",
        "dmesg: rknpu timeout/reset; NPU load",
        "rknn_run",
        "the simulated NPU always finishes: there is no timeout to miss"),
    -3: _Code(
        "The runtime cannot use the NPU device.",
        "Public -3 logs come from the older RKNPU1 API: rockchip-linux/rknn-toolkit2#31 ('E RKNNAPI: "
        "rknn_init, driver open fail'). librknnrt reports a device it cannot open as -1 ('failed to "
        "open rknn device'): with no rknpu driver loaded (rockchip-linux/rknn-toolkit2#49, "
        "airockchip/rknn-toolkit2#68) and for a user without access to the device node "
        "(rockchip-linux/rknn-toolkit2#244, fixed by joining the video group).",
        "the doctor's 'NPU device' line (driver present, this user can open it); dmesg | grep -i "
        "rknpu (did the driver load: a vendor kernel); in a container, is the device passed through",
        "doctor 'NPU device'; dmesg rknpu",
        "rknn_init",
        "the simulator opens no device"),
    -4: _Code(
        "The runtime could not get the memory it needed.",
        "'failed to malloc npu memory' at rknn_init on boards: rockchip-linux/rknn-toolkit2#44 (NPU "
        "IOMMU disabled: about 12 MB usable), #218 (dmesg: 'swiotlb buffer is full'); no file "
        "descriptors left (airockchip/rknn-llm#62; A37). The create_mem family returns NULL with no "
        "code: the course's binding names that NULL -4.",
        "dmesg (IOMMU disabled, swiotlb); MemAvailable; open descriptors (ulimit -n); leaks: gets "
        f"without release, mems and contexts never destroyed; the {_LOG} (the size asked for)",
        "dmesg: IOMMU/swiotlb; MemAvailable; leaks",
        "rknn_init"),
    -5: _Code(
        "An argument of the call is not acceptable.",
        "A query whose info size is not the struct's: rockchip-linux/rknn-toolkit#440 (RK3588 demo "
        "built with an older header: 'info_len(372) < sizeof(rknn_tensor_attr)(376)', -5). An "
        "rknn_inputs_set buffer smaller than n_elems x the size of rknn_input.type: -5 on "
        "librknnrt 2.3.2 (airockchip/rknn-toolkit2#558, RK3568; airockchip/rknn_model_zoo#298); "
        "type left at 0 means FLOAT32, 4x the bytes of uint8 data (rockchip-linux/rknpu2#9); a "
        "larger buffer is accepted (A64). On the simulator also: a bound mem smaller than its attr "
        "(A26, A62), an is_prealloc buffer too small (A15), a core mask the SoC does not have.",
        "the message (or the log) names the argument; buffer sizes against the attrs (an input: "
        "n_elems x the size of rknn_input.type); the header you compiled with against "
        "librknnrt.so's version (the doctor)",
        "the message: which argument; sizes",
        "rknn_query"),
    -6: _Code(
        "The bytes given are not a model this runtime can load.",
        "Bytes that are not an .rknn file (an ONNX file, a truncated download; in C a path passed "
        "with size > 0, so the path's characters are read as the model); a model from a toolkit "
        "newer than the runtime: 'Invalid RKNN model version' with -6 "
        "(cqu20160901/yolov11_dfl_rknn_Cplusplus#3; rockchip-linux/rknn-toolkit2#316, librknnrt 1.5.0).",
        "the file (does it start with 'RKNN'?), size 0 for a path; the doctor's 'toolkit vs "
        f"runtime' line; the {_LOG}",
        "file starts 'RKNN'?; doctor versions",
        "rknn_init"),
    -7: _Code(
        "The context handle does not name a live context.",
        "ctx 0 after an rknn_init whose return code was not checked, or a context already "
        "destroyed (simulator: A63; on a board a destroyed context may crash the call instead).",
        "the return code of rknn_init before using ctx; no call after rknn_destroy",
        "rknn_init's return code; not destroyed",
        "rknn_run"),
    -8: _Code(
        "An rknn_input given to the call is not acceptable.",
        "No public log of a 2.x runtime shows -8. The simulator returns it for an rknn_input whose "
        "count or index is past the model's inputs, whose buf is NULL, or whose type or fmt it does "
        "not convert (A64). A buffer too small for the input is -5 on librknnrt 2.3.2 (see -5).",
        "index < n_input (RKNN_QUERY_IN_OUT_NUM); buf set; type and fmt as RKNN_QUERY_INPUT_ATTR "
        f"allows; the {_LOG} names the field",
        "index < n_input; buf; type, fmt",
        "rknn_inputs_set"),
    -9: _Code(
        "An rknn_output given to the call is not acceptable.",
        "An output index or count past the model's outputs; outputs asked for before any rknn_run "
        "(simulator: A15).",
        "index < n_output (RKNN_QUERY_IN_OUT_NUM); rknn_run before rknn_outputs_get",
        "index < n_output; run before get",
        "rknn_outputs_get"),
    -10: _Code(
        "The runtime and the device (its driver or firmware) do not fit together.",
        "rknn_api.h's comment points at the runtime SDK and the NPU driver or firmware; the API "
        "reference's table says only that versions differ. No public log with -10 was found.",
        "RKNN_QUERY_SDK_VERSION or the doctor's 'librknnrt version' and 'rknpu driver' lines; "
        "update the older one",
        "doctor: librknnrt vs rknpu driver",
        "rknn_init",
        "the simulator has no driver whose version could differ"),
    -11: _Code(
        "The model uses a pre-compile mode the current driver cannot run (rknn_api.h only: the API "
        "reference's table does not list this code).",
        "In rknn_api.h only; no document or public log says which call returns it.",
        "driver and librknnrt versions (the doctor); export the model again with the rknn-toolkit2 "
        "matching librknnrt.so (the doctor's 'toolkit vs runtime' line)",
        "re-export; doctor 'toolkit vs runtime'",
        "rknn_init",
        "no document says which call returns it, and the course's models use no pre-compile mode"),
    -12: _Code(
        "The model uses an optimisation-level mode the current driver cannot run.",
        "A model built with such an optimisation level (API reference). Not to be confused with "
        "'driver open fail! ret = -12(ERROR_NOT_SUPPORTED)' (rockchip-linux/rknn-toolkit2#31): a "
        "driver error number, which that runtime reported as -3.",
        "driver and librknnrt versions (the doctor); export again with the matching rknn-toolkit2",
        "doctor versions; re-export",
        "rknn_init",
        "the course's models use no optimisation-level mode, and the simulator has no driver"),
    -13: _Code(
        "The model does not fit the platform it runs on.",
        "A model compiled for another SoC: the RKNPU1 runtime 1.7.0 returned -13 "
        "(rockchip-linux/rknn-toolkit#133); librknnrt 1.2.0 returned -1 for the same mistake "
        "(rockchip-linux/rknpu2#25). Simulator: A63.",
        f"the model's target platform (the {_LOG} prints it) against the doctor's 'SoC' line; "
        "export with target_platform = this SoC",
        "model's target (log) vs doctor 'SoC'",
        "rknn_init"),
}


# --------------------------------------------------------------------------- the triggers
def _digits(rt: Any, soc: Optional[str] = None) -> str:
    soc = soc or models.SOC_MODELS.get(rt.soc, rt.soc)
    return str(models.model_path("digits_cnn", soc))


def _with_context(rt: Any, action: Callable[[int], Any]) -> None:
    ctx = rt.init(_digits(rt))
    try:
        action(ctx)
    finally:
        rt.destroy(ctx)


def _huge_mem(rt: Any) -> None:
    # 1 PiB cannot be mapped on any machine (a 47-bit user address space is 128 TiB)
    _with_context(rt, lambda ctx: rt.create_mem2(ctx, 1 << 50, abi.RKNN_FLAG_MEMORY_FLAGS_DEFAULT))


def _wrong_query_size(rt: Any) -> None:
    # an 8-byte struct where the command fills a 376-byte rknn_tensor_attr
    _with_context(rt, lambda ctx: rt.query(ctx, abi.RKNN_QUERY_INPUT_ATTR, abi.rknn_input_output_num()))


def _onnx_bytes(rt: Any) -> None:
    onnx = models.model_path("digits_cnn", "rk3588").parent / "model.onnx"
    ctx = rt.init(onnx.read_bytes())
    rt.destroy(ctx)  # reached only if the runtime accepted the bytes


def _context_zero(rt: Any) -> None:
    rt.run(0)


def _input_index(rt: Any) -> None:
    def action(ctx: int) -> None:
        image = np.zeros((8, 8, 1), np.uint8)
        rt.inputs_set(ctx, [buffers.input_from_array(1, image, fmt=abi.RKNN_TENSOR_NHWC, type=abi.RKNN_TENSOR_UINT8)])
    _with_context(rt, action)


def _output_index(rt: Any) -> None:
    def action(ctx: int) -> None:
        rt.run(ctx)  # outputs exist: the index is what is wrong
        out = np.empty(10, np.float32)
        rt.outputs_get(ctx, [abi.rknn_output(index=1, want_float=1, is_prealloc=1,
                                             buf=out.ctypes.data, size=out.nbytes)])
    _with_context(rt, action)


def _other_soc(rt: Any) -> None:
    other = "rk3568" if models.SOC_MODELS.get(rt.soc, rt.soc) != "rk3568" else "rk3588"
    ctx = rt.init(_digits(rt, other))
    rt.destroy(ctx)


#: code -> (the call as a reader would write it, its short form, the trigger)
_TRIGGERS: Dict[int, Tuple[str, str, Callable[[Any], None]]] = {
    -4: ("rknn_create_mem2(ctx, 1 << 50, RKNN_FLAG_MEMORY_FLAGS_DEFAULT): 1 PiB, which no "
         "machine can map; create_mem2 returned NULL (the binding names it -4)",
         "create_mem2 NULL (binding -4)", _huge_mem),
    -5: ("rknn_query(ctx, RKNN_QUERY_INPUT_ATTR, &io_num, sizeof(io_num)): an 8-byte "
         "rknn_input_output_num where a 376-byte rknn_tensor_attr is filled", "query, wrong info size",
         _wrong_query_size),
    -6: ("rknn_init(&ctx, onnx, onnx_size, 0, NULL) with the bytes of digits_cnn's model.onnx",
         "init with ONNX bytes", _onnx_bytes),
    -7: ("rknn_run(0, NULL): a context rknn_init never made", "run with ctx 0", _context_zero),
    -8: ("rknn_inputs_set of digits_cnn's 8x8x1 UINT8 NHWC image with index 1: the model has one "
         "input (A64)", "inputs_set index 1 of 1 (A64)", _input_index),
    -9: ("after one rknn_run, rknn_outputs_get with index 1 on digits_cnn, which has one output",
         "outputs_get, index 1 of 1", _output_index),
    -13: ("rknn_init of digits_cnn built for another SoC (rk3568 on an rk3588, else rk3588)",
          "init another SoC's build", _other_soc),
}


def _simulator(soc: Optional[str], rt: Any) -> Tuple[Any, bool]:
    """(the simulator to run the triggers on, whether we made it). A simulator passed as
    ``rt`` is used as is; a board's runtime only lends its SoC: its triggers (ctx 0, 1 PiB)
    are not for a student's board."""
    if rt is not None and getattr(rt, "backend", "") == "sim":
        return rt, False
    from ..sim import SimRuntime
    return SimRuntime(soc or getattr(rt, "soc", "") or "rk3588"), True


def _raise_trigger(code: int, rt: Any) -> errors.RknnError:
    call, _short, trigger = _TRIGGERS[code]
    try:
        trigger(rt)
    except errors.RknnError as exc:
        return exc
    raise RuntimeError(f"on {rt.source}, {call} raised no error")


def reproduce_error(code: int, soc: Optional[str] = None, rt: Any = None) -> errors.RknnError:
    """The RknnError the trigger of ``code`` really raised on the simulated ``soc`` (returned,
    not raised). LookupError for a code the simulator cannot produce, saying why.

    ``rt``: a simulator to use; a board's runtime only gives its SoC (the triggers always
    run on the simulator). ``soc`` defaults to rt's, else rk3588."""
    if code not in _CODES:
        raise LookupError(f"{code} is not an RKNN error code: they are {CODES[0]} ... {CODES[-1]}")
    name = abi.ERROR_NAMES[code]
    if code not in _TRIGGERS:
        raise LookupError(f"{code} ({name}) is board only: {_CODES[code].board_only}")
    sim, made = _simulator(soc, rt)
    try:
        return _raise_trigger(code, sim)
    finally:
        if made:
            sim.close()


# --------------------------------------------------------------------------- the table
@dataclass(frozen=True)
class ErrorRow:
    """One error code: what it means, triggers, the call that produced it here, the message."""
    code: int
    name: str
    meaning: str
    trigger: str
    reproduced: str          #: the exact call, or "board only: <why>"
    reproduced_here: bool
    message: str             #: str() of the RknnError raised (or error_for's, marked "[not reproduced]")
    check: str

    def __str__(self) -> str:
        lines = [f"{self.code} {self.name}"]
        for f in fields(self)[2:]:
            if f.name == "reproduced_here":
                continue
            label = {"reproduced": "reproduced here", "message": "the binding's message",
                     "trigger": "what triggers it", "check": "what to check"}.get(f.name, f.name)
            lines.extend(textwrap.wrap(f"{label}: {getattr(self, f.name)}", _WIDTH,
                                       subsequent_indent="    "))
        return "\n".join(lines)

    __repr__ = __str__


class _Text(str):
    """A str that shows as itself in a notebook (no quotes, real line breaks)."""

    def __repr__(self) -> str:
        return str(self)


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"


class ErrorTable:
    """The 13 RKNN error codes, one :class:`ErrorRow` each, as measured on ``source``."""

    columns = ("code", "name", "meaning", "trigger", "reproduced", "message", "check")

    def __init__(self, rows: Sequence[ErrorRow], source: str, short: Dict[int, Tuple[str, str]]) -> None:
        self.rows: List[ErrorRow] = list(rows)
        self.source = source
        self._short = short  # code -> (reproduced, check), for the 100-column text

    def row(self, code: int) -> ErrorRow:
        for row in self.rows:
            if row.code == code:
                return row
        raise KeyError(f"no row for {code}: the codes are {CODES[0]} ... {CODES[-1]}")

    @property
    def frame(self) -> Any:
        """Every column of every row as a pandas DataFrame (``.attrs["source"]``)."""
        import pandas as pd
        table = pd.DataFrame([{c: getattr(r, c) for c in self.columns + ("reproduced_here",)}
                              for r in self.rows])
        table.attrs["source"] = self.source
        return table

    def show(self, columns: Sequence[str] = ("code", "name", "message")) -> _Text:
        """The chosen columns of every row in full, wrapped to 100 columns."""
        unknown = [c for c in columns if c not in self.columns]
        if unknown:
            raise ValueError(f"unknown columns {unknown}; choose from {list(self.columns)}")
        lines = [f"RKNN error codes — {self.source}"]
        for r in self.rows:
            head = " ".join(str(getattr(r, c)) for c in columns if c in ("code", "name"))
            lines.append(head or str(r.code))
            for c in columns:
                if c not in ("code", "name"):
                    lines.extend(textwrap.wrap(f"{c}: {getattr(r, c)}", _WIDTH, initial_indent="  ",
                                               subsequent_indent="    "))
        return _Text("\n".join(lines))

    def __str__(self) -> str:
        n = sum(r.reproduced_here for r in self.rows)
        head = _cut(f"RKNN error codes — {self.source}: {n} of {len(self.rows)} reproduced", _WIDTH)
        widths = (4, 22, 30, 41)  # a short call is at most 29 characters: two spaces end it
        def line(cells: Sequence[str]) -> str:
            return " ".join(_cut(c, w).ljust(w) for c, w in zip(cells, widths)).rstrip()
        lines = [head, line(("code", "name", "reproduced here", "what to check"))]
        for r in self.rows:
            repro, check = self._short[r.code]
            lines.append(line((str(r.code), r.name.replace("RKNN_ERR_", ""), repro, check)))
        return "\n".join(lines)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        cell = "style='text-align:left; vertical-align:top; padding:2px 6px'"
        head = "".join(f"<th {cell}>{h}</th>" for h in
                       ("code", "name", "meaning", "reproduced here", "what to check", "details"))
        body = []
        for r in self.rows:
            details = (f"<details><summary>trigger, message</summary><p><b>What triggers it:</b> "
                       f"{html.escape(r.trigger)}</p><p><b>The binding's message:</b> "
                       f"<code>{html.escape(r.message)}</code></p></details>")
            repro = html.escape(r.reproduced) if r.reproduced_here else f"<i>{html.escape(r.reproduced)}</i>"
            body.append("<tr>" + "".join(f"<td {cell}>{v}</td>" for v in (
                r.code, html.escape(r.name.replace("RKNN_ERR_", "")), html.escape(r.meaning), repro,
                html.escape(r.check), details)) + "</tr>")
        n = sum(r.reproduced_here for r in self.rows)
        return (f"<p><b>RKNN error codes</b> — {html.escape(self.source)}: {n} of {len(self.rows)} "
                f"reproduced here</p><table style='font-size:90%'><thead><tr>{head}</tr></thead>"
                f"<tbody>{''.join(body)}</tbody></table>")


def error_codes(soc: Optional[str] = None, rt: Any = None) -> ErrorTable:
    """One row per RKNN error code, -1 ... -13. Every code the simulator can produce is
    produced here by its trigger on the simulated ``soc``, and the row keeps the message
    of the RknnError really raised; the others are "board only", with the reason.

    ``rt``: a simulator to use; a board's runtime only gives its SoC (the triggers always
    run on the simulator). ``soc`` defaults to rt's, else rk3588."""
    rt, made = _simulator(soc, rt)
    rows, short = [], {}
    try:
        for code in CODES:
            known, name = _CODES[code], abi.ERROR_NAMES[code]
            if code in _TRIGGERS:
                call, call_short, _trigger = _TRIGGERS[code]
                exc = _raise_trigger(code, rt)
                same = exc.code == code
                reproduced = call if same else f"{call} — raised {exc.code} ({exc.name}) instead"
                message = str(exc)
                repro_short = call_short if same else f"raised {exc.code} instead"
            else:
                same = False
                reproduced = f"board only: {known.board_only}"
                message = f"[not reproduced] {errors.error_for(code, known.function)}"
                repro_short = "board only"
            rows.append(ErrorRow(code=code, name=name, meaning=known.meaning, trigger=known.trigger,
                                 reproduced=reproduced, reproduced_here=same, message=message,
                                 check=known.check))
            short[code] = (repro_short, known.check_short)
    finally:
        if made:
            rt.close()
    return ErrorTable(rows, rt.source, short)


__all__ = ["CODES", "ErrorRow", "ErrorTable", "error_codes", "reproduce_error"]
