"""Lab 7, exercise 8 (★ fix a C program): the check :func:`check_c_program`.

The check compiles the student's program with gcc against the course's own declarations of
the RKNN C API (``rknnlab/c/rknn_api.h``), links it with the course's C test double of
librknnrt (``rknnlab/c/rknn_double.c``, built once per machine and cached), and runs it in a
process of its own (a crash cannot take the notebook's kernel down; a timeout stops a hung
program) on a fake model and random frames of the check's choosing.  The model's payload
carries a salt the check draws each time (the double adds it to every output byte), so the
printed outputs are the runtime's, not the documented formula applied to the frames.  The
double writes one line per memory call (``$RKNN_DOUBLE_EVENTS_FILE``); the check judges
from those lines and from what the program prints: one rknn_run per frame and its outputs
from the runtime (a get per frame, or mems bound before the first run), the outputs, no
allocation per frame after the first, every is_prealloc = 0 get released, no bind or mem per
frame, everything destroyed at the end.
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from . import _lab07_c_cases as _cases
from ._core import CheckResult, _Fail, _not_done
from ._lab07_common import EX_C, _LAB

__all__ = ["check_c_program"]

_C_DIR = Path(__file__).resolve().parents[1] / "c"
_HEADER_DIR = _C_DIR
_DOUBLE_SOURCE = _C_DIR / "rknn_double.c"
_CFLAGS = ["-std=c11", "-Wall", "-Wextra", "-Werror"]
_RUN_TIMEOUT_S = 10
_PERTURB = "165"        # glibc fills blocks it hands out with 0x5A, blocks it takes back with 0xA5
_ERRORS_SHOWN = 4

_SIZE_RULE = ("A preallocated output buffer must hold the output: n_elems × 4 bytes with want_float = 1, "
              "attr.size bytes with want_float = 0. Reallocate only when it is too small; a larger buffer is "
              "fine if rknn_output.size gives its real capacity.")
_REUSE_RULE = "Reuse means no allocation per call. Flat memory only shows there is no leak."
_SUPPORTED = ("The supported reuse is is_prealloc = 1 into buffers you allocate once, or an output mem "
              "bound once with rknn_set_io_mem.")
_PAIRING_NOTE = ("Note: {n} of {m} gets with is_prealloc = 1 had no rknn_outputs_release after them. This "
                 "course pairs every rknn_outputs_get with one rknn_outputs_release, also with is_prealloc = 1. "
                 "Rockchip's code disagrees: its dynamic-shape demo pairs them, its zipformer demo "
                 "(is_prealloc = 1) never releases. Not a failure here.")


_BIND_HINT = ("the attr you bind a mem with tells the runtime the tensor's type and layout (fmt), and the mem "
              "must hold that layout's bytes. The type and layout must be ones this runtime converts to: an "
              "input as UINT8 or INT8 NHWC (size_with_stride bytes); an output in the model's own type "
              "(attr.size bytes, or size_with_stride for a native attr), or its plain attr with type set to "
              "RKNN_TENSOR_FLOAT32, fmt NCHW or NHWC (n_elems × 4 bytes), as Rockchip's zero-copy demos bind it.")


def _abi_name(prefix: str, value: int, names: Sequence[str]) -> str:
    from ..rknn import abi
    found = {getattr(abi, prefix + n): n for n in names if hasattr(abi, prefix + n)}
    return found.get(value, f"{value} (no such value)")


def _type_name(value: int) -> str:
    return _abi_name("RKNN_TENSOR_", value, ("FLOAT32", "FLOAT16", "INT8", "UINT8", "INT16", "UINT16", "INT32",
                                             "UINT32", "INT64", "BOOL", "INT4", "BFLOAT16"))


def _fmt_name(value: int) -> str:
    return _abi_name("RKNN_TENSOR_", value, ("NCHW", "NHWC", "NC1HWC2", "UNDEFINED"))


def _error_name(code: int) -> str:
    from ..rknn import abi
    names = {getattr(abi, n): n for n in dir(abi) if n.startswith("RKNN_ERR_")}
    return names.get(code, "an unknown code")


# =========================================================================== building
def _compiler() -> Optional[str]:
    return shutil.which("gcc") or shutil.which("cc")


def _cache_dirs() -> List[str]:
    from ..probe import _cache_dir
    return [_cache_dir(), os.path.join(tempfile.gettempdir(), f"rknnlab-{os.getuid()}")]


def _double_library(cc: str) -> str:
    """The double built as a shared library, once per source, machine and compiler (cached
    as the C sampler is)."""
    source = _DOUBLE_SOURCE.read_bytes()
    key = hashlib.sha256(b"\0".join([source, platform.machine().encode(), cc.encode()])).hexdigest()[:16]
    name = f"librknnrt_double-{key}.so"
    problems = []
    for d in _cache_dirs():
        path = os.path.join(d, name)
        if os.path.exists(path):
            return path
        try:
            os.makedirs(d, mode=0o700, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=name + ".", suffix=".tmp", dir=d)
            os.close(fd)
        except OSError as exc:
            problems.append(f"{d}: {exc}")
            continue
        try:
            proc = subprocess.run([cc, "-shared", "-fPIC", "-O1", "-pthread", "-o", tmp, str(_DOUBLE_SOURCE)],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
            if proc.returncode != 0:
                raise _Fail("The course's C test double did not build, so the check cannot run your program.",
                            "please report this to the course's authors with the lines above.",
                            proc.stdout.decode("utf-8", "replace").strip().splitlines()[-3:])
            os.replace(tmp, path)   # atomic: two kernels building at once race harmlessly
            return path
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    raise _Fail("No writable directory for the check's compiled files: " + "; ".join(problems),
                "set XDG_CACHE_HOME to a directory you can write, then run the check again.")


_DIAGNOSTIC = re.compile(r"^(?P<file>[^:\n]+):(?P<line>\d+):(?:\d+:)? (?P<kind>error|fatal error): (?P<text>.*)$")


def _compile_errors(output: str, source: str) -> List[str]:
    """gcc's errors as 'line N: message' (its spelling guesses dropped: some point at the wrong
    name), the link errors as they are."""
    found: List[str] = []
    for line in output.splitlines():
        m = _DIAGNOSTIC.match(line)
        if m and os.path.basename(m.group("file")) == os.path.basename(source):
            text = re.sub(r"; did you mean [^?]*\?", "", m.group("text"))
            text = re.sub(r" \[-Werror=[^\]]*\]$", "", text)
            found.append(f"line {m.group('line')}: {text}")
        elif "undefined reference to" in line:
            found.append("link: " + line.split(": ", 1)[-1].strip())
    return found


def _compile(cc: str, source: str, double: str, exe: str) -> None:
    cmd = [cc, *_CFLAGS, "-O1", "-I", str(_HEADER_DIR), source, double,
           f"-Wl,-rpath,{os.path.dirname(double)}", "-o", exe]
    env = dict(os.environ, LC_ALL="C", LANG="C")   # plain quotes in the messages
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120, env=env)
    if proc.returncode == 0:
        return
    errors = _compile_errors(proc.stdout.decode("utf-8", "replace"), source)
    shown = errors[:_ERRORS_SHOWN] or proc.stdout.decode("utf-8", "replace").strip().splitlines()[-3:]
    more = len(errors) - len(shown)
    raise _Fail(f"Your program does not compile with gcc {' '.join(_CFLAGS)} against the course's rknn_api.h "
                f"({len(errors) or 'some'} error(s)" + (f", the first {len(shown)} below" if more > 0 else "")
                + ").",
                "a name the compiler does not know may be one the recipe invented. Compare each RKNN "
                "function, its arguments and each constant with rknn_api.h (Chapter 2 lists the runtime's "
                "functions). Warnings count as errors here.",
                shown)


# =========================================================================== running
def _read_source(path: Any, folder: str) -> str:
    """The student's program written to a file in ``folder``: from a path, or from the program's
    text itself (a string with several lines)."""
    if isinstance(path, (str, os.PathLike)) and "\n" in str(path):
        text = str(path)
    else:
        if not isinstance(path, (str, os.PathLike)):
            raise _not_done(f"expected the name of your C file, got {type(path).__name__}.",
                            f"write the program with %%writefile {_cases.FILE_NAME}, then call "
                            f"check_c_program(\"{_cases.FILE_NAME}\").")
        p = Path(path)
        if not p.is_file():
            raise _not_done(f"there is no file {str(p)!r} here.",
                            f"run the %%writefile {_cases.FILE_NAME} cell first (it writes your program), "
                            "then this check.")
        text = p.read_text(encoding="utf-8", errors="replace")
    if "main" not in text:
        raise _not_done("the file holds no main function yet.", "write the whole program, with its main().")
    if text.split() == _cases.PUBLISHED.split():   # the stub as shipped, whatever its line ends
        raise _not_done("the program is still the one as published: nothing in it has changed yet.",
                        f"edit the %%writefile {_cases.FILE_NAME} cell, starting with the names the compiler "
                        "does not know (Hint 1), then how the program keeps its outputs (Hint 2). Run that "
                        "cell, then this check.")
    dest = os.path.join(folder, _cases.FILE_NAME)
    with open(dest, "w", encoding="utf-8") as f:
        f.write(text)
    return dest


class _Run:
    """One run of the program: its exit, what it printed, the double's events."""

    def __init__(self, returncode: Optional[int], stdout: str, stderr: str, events: List[Dict[str, Any]]):
        self.returncode, self.stdout, self.stderr, self.events = returncode, stdout, stderr, events

    def calls(self, name: str) -> List[Dict[str, Any]]:
        return [e for e in self.events if e.get("call") == name]


def _malloc_debug() -> Optional[str]:
    """glibc's malloc debugging library beside this process's libc (glibc 2.34 on; older glibc
    has it built in).  With it and MALLOC_CHECK_=3, malloc_usable_size gives the bytes a block
    was asked for, not glibc's rounded size: the double then sees a buffer 4 bytes short."""
    try:
        with open("/proc/self/maps") as maps:
            libc = next((line.split()[-1] for line in maps if "/libc.so.6" in line), None)
    except OSError:
        return None
    path = os.path.join(os.path.dirname(libc), "libc_malloc_debug.so.0") if libc else None
    return path if path and os.path.exists(path) else None


def _run(exe: str, folder: str, n_frames: int, salt: int) -> Tuple[_Run, Any]:
    model = os.path.join(folder, "model.rknn")
    with open(model, "wb") as f:
        f.write(_cases.model_bytes(salt))
    frames = _cases.frames(n_frames)
    frames_path = os.path.join(folder, "frames.bin")
    frames.tofile(frames_path)
    events_path = os.path.join(folder, "events.jsonl")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RKNN_DOUBLE_")}
    tunables = env.get("GLIBC_TUNABLES")
    env.update(RKNN_DOUBLE_EVENTS_FILE=events_path, RKNN_DOUBLE_NO_LOG="1", MALLOC_PERTURB_=_PERTURB,
               GLIBC_TUNABLES=(tunables + ":" if tunables else "") + "glibc.malloc.tcache_count=0", LC_ALL="C",
               MALLOC_CHECK_="3")
    debug = _malloc_debug()
    if debug:
        env["LD_PRELOAD"] = debug + (" " + env["LD_PRELOAD"] if env.get("LD_PRELOAD") else "")
    try:
        with open(frames_path, "rb") as stdin:
            proc = subprocess.run([exe, model], cwd=folder, env=env, stdin=stdin, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, timeout=_RUN_TIMEOUT_S)
        code: Optional[int] = proc.returncode
        out, err = proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as exc:
        code, out, err = None, exc.stdout or b"", exc.stderr or b""
    events = []
    try:
        with open(events_path) as f:
            for line in f:
                try:
                    events.append(json.loads(line))
                except ValueError:   # the last line of a process killed while writing it
                    break
    except OSError:
        pass
    return _Run(code, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), events), frames


# =========================================================================== judging
def _frame_of(run: _Run, event: Dict[str, Any]) -> int:
    """The frame an event belongs to, counted from 0 as the program prints them: a get or a
    release belongs to the rknn_run before it; any other call to the rknn_run after it."""
    runs = 0
    for e in run.events:
        if e is event:
            break
        runs += e.get("call") == "rknn_run"
    after_run = event.get("call") in ("rknn_outputs_get", "rknn_outputs_release")
    return max(runs - 1, 0) if after_run else runs


def _frames_text(frames: Sequence[int]) -> str:
    """'frame 3', 'frames 2–7', or 'frames 2, 4, 6, 8 and 3 more'."""
    frames = sorted(set(frames))
    if len(frames) == 1:
        return f"frame {frames[0]}"
    if frames == list(range(frames[0], frames[-1] + 1)):
        return f"frames {frames[0]}–{frames[-1]}"
    shown = ", ".join(str(f) for f in frames[:4])
    return f"frames {shown}" + (f" and {len(frames) - 4} more" if len(frames) > 4 else "")


def _judge_errors(run: _Run) -> None:
    """The first call the double refused, with what the program gave it."""
    for e in run.events:
        ret = e.get("ret", 0)
        if e.get("call") == "exit" or ret == 0:
            continue
        call = e["call"]
        same = [x for x in run.calls(call) if x.get("ret") == ret]
        frames = [_frame_of(run, x) for x in same]
        where = f" on {_frames_text(frames)}" if run.calls("rknn_run") else ""
        details = []
        hint = "check the arguments of that call against rknn_api.h and Chapter 2."
        if call == "rknn_outputs_get":
            for index, pre, wf, given, need, held in e.get("outputs", []):
                if held == "small":
                    details.append(f"output {index}: is_prealloc = 1, want_float = {wf}, rknn_output.size = "
                                   f"{given:,} bytes: too small for that output")
            if details:
                hint = (_SIZE_RULE + " Allocate each buffer once, before the loop, from the attr "
                        "RKNN_QUERY_OUTPUT_ATTR gives.")
        elif call == "rknn_create_mem":
            hint = "create the mems once, before the loop, sized from the attr you bind them with."
        elif call == "rknn_set_io_mem":
            if "type" in e:
                details.append(f"tensor {e.get('name') or '(no name)'!r}: attr type {_type_name(e['type'])}, "
                               f"fmt {_fmt_name(e['fmt'])}, n_elems {e['n_elems']:,}, size {e['size']:,}, "
                               f"size_with_stride {e['size_with_stride']:,}; "
                               + (f"mem of {e['mem_size']:,} bytes" if e["mem_size"] >= 0
                                  else "not a mem rknn_create_mem returned"))
            hint = _BIND_HINT
        returned = "NULL" if call == "rknn_create_mem" else f"{ret} ({_error_name(ret)})"
        raise _Fail(f"{call} returned {returned}{where}.", hint, details)


_END_CRASH = ("a crash at the end is most often a double free, or a free() of a buffer the runtime owns: never "
              "free() what a get with is_prealloc = 0 gave you, nor a mem's virt_addr (rknn_destroy_mem frees it); "
              "free each buffer of your own once, after its last use.")
_MEM_CRASH = ("a mem holds mem->size bytes from its virt_addr: write each frame row by row within them (rows "
              "w_stride × channels apart) and read no more of an output mem than its n_elems values, in the type "
              "you bound it with.")


def _crash_hint(last: Optional[str], at_exit: bool) -> str:
    """Where to look for a crash, from the last memory call the runtime recorded before it."""
    if at_exit or last in ("rknn_destroy", "rknn_destroy_mem"):
        return _END_CRASH
    if last == "rknn_outputs_get":
        return ("a crash right after rknn_outputs_get often means the runtime wrote past the end of a buffer: "
                "check each buffer's real size against rknn_output.size. " + _SIZE_RULE)
    if last == "rknn_outputs_release":
        return ("after rknn_outputs_release, the buffers a get with is_prealloc = 0 allocated are gone: read "
                "the values before the release and never free() them yourself. With is_prealloc = 1 the "
                "buffers are yours: keep them for the next frame and free each once, after the loop.")
    if last in ("rknn_create_mem", "rknn_set_io_mem", "rknn_mem_sync"):
        return _MEM_CRASH
    if last in ("rknn_inputs_set", "rknn_run"):
        return ("the crash came after rknn_inputs_set or rknn_run, before any get: look at your own buffers "
                "(the frame buffer holds in_attr.n_elems bytes; fread must not write more) and at the "
                "rknn_output array you pass to the get (one element per output, each with its index).")
    if last == "rknn_init":
        return ("the crash came after rknn_init, before any other memory call: look at the queries (each "
                "attr with its index set, and sizeof the struct you pass) and at the buffers you size from "
                "their answers.")
    return ("the crash came before the runtime recorded any call: look at how the program reads its "
            "arguments (the model's path is argv[1]) before rknn_init.")


def _judge_capacity(run: _Run) -> None:
    """A buffer of the program's own (from malloc) smaller than the rknn_output.size it declared:
    the runtime may write that many bytes, past the block's end, which glibc's rounding can hide
    (the double reads each block's real size, its "capacity"; -1 where it cannot tell)."""
    def short(e: Dict[str, Any]) -> List[Tuple[int, int, int]]:
        return [(o[0], o[3], c) for o, c in zip(e.get("outputs", []), e.get("capacity", []))
                if o[1] and 0 <= c < o[3]]

    gets = [e for e in run.calls("rknn_outputs_get") if short(e)]
    if gets:
        index, given, capacity = short(gets[0])[0]
        frames = _frames_text([_frame_of(run, e) for e in gets])
        raise _Fail(f"rknn_outputs_get on {frames}, output {index}: rknn_output.size says {given:,} bytes, the "
                    f"buffer holds only {capacity:,} (malloc's real size of that block): the runtime may write "
                    "past its end.", "allocate at least what rknn_output.size tells the runtime: " + _SIZE_RULE)


def _judge_exit(run: _Run) -> None:
    tail = [line for line in run.stderr.strip().splitlines()][-3:]
    last = next((e["call"] for e in reversed(run.events) if e.get("call") != "exit"), None)
    at_exit = bool(run.calls("exit"))
    after = f" The last memory call the runtime recorded was {last}." if last else ""
    if at_exit:
        after += " Your program had already ended: the runtime had written its exit record."
    if run.returncode is None:
        raise _Fail(f"Your program did not finish within {_RUN_TIMEOUT_S} s.{after}",
                    "look for a loop that never ends: the check gives the model's path as argv[1] and the "
                    "frames on stdin, and the input ends after the last frame.", tail)
    if run.returncode < 0:
        try:
            name = signal.Signals(-run.returncode).name
        except ValueError:
            name = f"signal {-run.returncode}"
        hint = _crash_hint(last, at_exit)
        if any(w in run.stderr for w in ("invalid next size", "corrupted size")):
            hint += (" glibc's message says a heap block was overwritten: also look for a buffer smaller than "
                     "the size you gave the runtime (rknn_output.size larger than what you allocated).")
        raise _Fail(f"Your program crashed ({name}) after {len(run.events)} RKNN call(s).{after}", hint, tail)
    if run.returncode != 0:
        raise _Fail(f"Your program exited with code {run.returncode}.{after}",
                    "the check gives the model's path as argv[1] and the frames on stdin (program MODEL < FRAMES); "
                    "the lines above are what your program wrote to stderr.", tail)


_LINE = re.compile(r"^frame (\d+) output (\d+):(.*)$")


def _printed(run: _Run) -> Dict[Tuple[int, int], List[float]]:
    """What the program printed, by (frame, output)."""
    printed: Dict[Tuple[int, int], List[float]] = {}
    for line in run.stdout.splitlines():
        m = _LINE.match(line.strip())
        if not m:
            continue
        try:
            printed[(int(m.group(1)), int(m.group(2)))] = [float(v) for v in m.group(3).split()]
        except ValueError:
            continue
    return printed


def _judge_lines(printed: Dict[Tuple[int, int], List[float]], n: int) -> None:
    missing = [f for f in range(n) for i in range(len(_cases.OUTPUT_NAMES)) if (f, i) not in printed]
    if missing:
        raise _Fail(f"Your program printed no `frame F output I:` line for {_frames_text(missing)} "
                    f"of the {n} frames on stdin (counted from 0).",
                    "run every frame on stdin (the input's n_elems bytes each, until the input ends), and keep "
                    "the program's printf lines.")


def _judge_runs(run: _Run, n: int) -> None:
    """One rknn_run per frame, and each output from the runtime: a get per frame, or a mem bound to
    it before the first run (the double writes into bound mems at each run)."""
    events = run.events
    runs = [k for k, e in enumerate(events) if e.get("call") == "rknn_run" and e.get("ret") == 0]
    gets = [e for e in run.calls("rknn_outputs_get") if e.get("ret") == 0]
    hint = ("for each frame: set its input (rknn_inputs_set, or write it into the input mem), one rknn_run, "
            "then that frame's outputs from the runtime: one rknn_outputs_get, or output mems bound once with "
            "rknn_set_io_mem before the first rknn_run. The check's model is its own: only the runtime knows "
            "its outputs.")
    if len(runs) != n:
        raise _Fail(f"{len(runs)} rknn_run and {len(gets)} rknn_outputs_get for {n} frames: get each frame's "
                    "outputs from the runtime.", hint)
    bound = {e.get("name") for e in events[:runs[0]]
             if e.get("call") == "rknn_set_io_mem" and e.get("ret") == 0}
    for index, name in enumerate(_cases.OUTPUT_NAMES):
        got = sum(o[0] == index for e in gets for o in e["outputs"])
        if got != n and name not in bound:
            raise _Fail(f"Output {index} ({name}): {got} rknn_outputs_get returned it for {n} frames, and no mem "
                        "was bound to it before the first rknn_run: get each frame's outputs from the runtime.",
                        hint)


def _judge_values(printed: Dict[Tuple[int, int], List[float]], frames: Any, salt: int) -> str:
    n = len(frames)
    for f in range(n):
        for i, values in enumerate(_cases.expected(frames[f], salt)):
            got = printed[(f, i)]
            if len(got) != len(values):
                raise _Fail(f"frame {f} output {i}: your program printed {len(got)} values; the output has "
                            f"{len(values)} elements.",
                            "print every element of each output, as the program did: one line per frame "
                            "and output, `frame F output I:` then the values with %.2f.")
            bad = [k for k, (g, w) in enumerate(zip(got, values)) if abs(g - w) > 0.006]
            if bad:
                k = bad[0]
                raise _Fail(f"frame {f} output {i}: {len(bad)} of {len(values)} printed values differ from what the "
                            f"runtime computes for that frame (value {k}: printed {got[k]:.2f}, the runtime's "
                            f"{values[k]:.2f}).",
                            "read each output after the rknn_run of the frame you set, as float32 values "
                            "(want_float = 1, or a mem bound with type RKNN_TENSOR_FLOAT32), or dequantise int8 "
                            "with the attr's zp and scale; keep the printf format (%.2f).")
    return (f"{n} frames (random, new at every check), one rknn_run each: every printed output equals what the "
            "runtime computes")


def _judge_memory(run: _Run) -> List[str]:
    """Allocation per frame, the leak, binds and mems per frame, and the end; details and notes."""
    details: List[str] = []
    gets = [e for e in run.calls("rknn_outputs_get") if e.get("ret") == 0]
    releases = len([e for e in run.calls("rknn_outputs_release") if e.get("ret") == 0])
    runtime_gets = [e for e in gets if any(o[5] == "runtime" for o in e["outputs"])]
    destroys = run.calls("rknn_destroy")
    held_at_destroy = sum(e.get("unreleased", 0) for e in destroys)

    # the leak: is_prealloc = 0 gets with no release before the next get
    unpaired, waiting = 0, False
    unpaired_pre1, waiting_pre1 = 0, False
    for e in run.events:
        call = e.get("call")
        if call == "rknn_outputs_get" and e.get("ret") == 0:
            allocating = any(o[5] == "runtime" for o in e["outputs"])
            unpaired += waiting
            unpaired_pre1 += waiting_pre1
            waiting, waiting_pre1 = allocating, not allocating
        elif call == "rknn_outputs_release" and e.get("ret") == 0:
            waiting = waiting_pre1 = False
    unpaired += waiting
    unpaired_pre1 += waiting_pre1
    if unpaired:
        raise _Fail(f"The leak: {unpaired} of {len(runtime_gets)} rknn_outputs_get calls with is_prealloc = 0 had "
                    f"no rknn_outputs_release after them ({len(gets)} gets, {releases} release(s)); "
                    f"{held_at_destroy:,} output buffer(s) the runtime allocated were still held when "
                    "rknn_destroy ran.",
                    "with is_prealloc = 0 every get allocates new buffers, whatever buf held before. " + _SUPPORTED)
    late = [e for e in runtime_gets[1:]]
    if late:
        n_buffers = sum(o[5] == "runtime" for e in late for o in e["outputs"])
        raise _Fail(f"The runtime allocated {n_buffers} output buffer(s) inside rknn_outputs_get on "
                    f"{_frames_text([_frame_of(run, e) for e in late])} after the first (is_prealloc = 0). Each "
                    "was released: no leak, but no reuse either. " + _REUSE_RULE,
                    _SUPPORTED)

    # the caller's buffers: still holding what the last get wrote into them?
    words = {"new": "a buffer no get had written before (a new address)",
             "fresh": "freshly allocated (malloc's fill pattern)",
             "freed": "freed memory (the fill glibc leaves in freed blocks)",
             "zero": "zero-filled (freshly allocated with calloc, or cleared)",
             "changed": "changed by your program since the last get"}
    worst: Dict[str, List[int]] = {}
    for e in gets[1:]:
        for index, pre, wf, given, need, held in e["outputs"]:
            if held in words:
                worst.setdefault(held, []).append(_frame_of(run, e))
    if worst:
        held, frames = max(worst.items(), key=lambda kv: len(kv[1]))
        hint = ("allocate each output buffer once, before the loop, and pass the same buffer to every get; "
                "free it after the loop." if held != "changed" else
                "only read the buffer between gets: copy the values you want to keep elsewhere.")
        raise _Fail(f"Before rknn_outputs_get on {_frames_text(frames)}, a preallocated output buffer did not "
                    f"hold what the last get wrote into it: it was {words[held]}. " + _REUSE_RULE, hint)

    # zero-copy: bind once, create once
    first_run = next((k for k, e in enumerate(run.events) if e.get("call") == "rknn_run"), None)
    if first_run is not None:
        after = run.events[first_run + 1:]
        binds = [e for e in after if e.get("call") == "rknn_set_io_mem"]
        mems = [e for e in after if e.get("call") == "rknn_create_mem"]
        if mems:
            raise _Fail(f"Your program created {len(mems)} mem(s) after the first rknn_run (on "
                        f"{_frames_text([_frame_of(run, e) for e in mems])}): an allocation per frame. "
                        + _REUSE_RULE, "create every mem once, before the loop. " + _SUPPORTED)
        if binds:
            raise _Fail(f"Your program called rknn_set_io_mem {len(binds)} time(s) after the first rknn_run (on "
                        f"{_frames_text([_frame_of(run, e) for e in binds])}): it binds inside the loop.",
                        "bind each mem once, before the loop, and use it for every frame. " + _SUPPORTED)

    # the end
    ends = run.calls("exit")
    if not ends:
        raise _Fail("Your program ended without the runtime library's exit record (did it end with _exit, "
                    "abort, or a signal?).", "return from main at the end.")
    end = ends[-1]
    created = len([e for e in run.calls("rknn_create_mem") if e.get("ret") == 0])
    destroyed = len([e for e in run.calls("rknn_destroy_mem") if e.get("ret") == 0])
    if end["contexts"]:
        succeeded = len([e for e in destroys if e.get("ret") == 0])
        raise _Fail(f"{end['contexts']} context(s) were still alive when your program ended: rknn_destroy "
                    f"succeeded {succeeded} time(s).",
                    "destroy every context you initialised, after its last use.")
    if end["mems"]:
        raise _Fail(f"{end['mems']} mem(s) were still alive when your program ended (rknn_create_mem: {created}, "
                    f"rknn_destroy_mem: {destroyed}).", "destroy every mem you created, before rknn_destroy.")

    if gets:
        allocated = sum(o[5] == "runtime" for e in gets for o in e["outputs"])
        details.append(f"{len(gets)} rknn_outputs_get, {releases} rknn_outputs_release; the runtime allocated "
                       f"{allocated} output buffer(s) in all" + (" (first frame only)" if allocated else "")
                       + "; from the second get on, each of your buffers still held what the last get "
                       "wrote into it")
    binds_all = len([e for e in run.calls("rknn_set_io_mem") if e.get("ret") == 0])
    if binds_all or created:
        details.append(f"{created} mem(s) created and {binds_all} bound, all before the first rknn_run; "
                       f"{destroyed} destroyed")
    details.append(f"at the end: no context, no mem, no runtime buffer left ({held_at_destroy} held at "
                   "rknn_destroy)")
    if unpaired_pre1:
        details.append(_PAIRING_NOTE.format(n=unpaired_pre1, m=len(gets)))
    return details


# =========================================================================== the check
def check_c_program(path: Any = _cases.FILE_NAME) -> CheckResult:
    """Exercise 8: your fixed program (the file's name, or its text).

    The check compiles it with gcc -std=c11 -Wall -Wextra -Werror against the course's
    rknn_api.h, and runs it in its own process against the course's C test double of
    librknnrt, as ``program MODEL < FRAMES`` (a fake model and random uint8 frames the check
    chooses).  It passes when the program runs the model once per frame and takes each frame's
    outputs from the runtime, the printed outputs equal what the runtime computes, the runtime
    allocates no output buffer per frame after the first, your own buffers are allocated once,
    nothing is bound or created per frame, and every context and mem is destroyed.  The
    program as published, not edited yet, is "not done" (any edit is judged).  Needs gcc
    (``sudo apt install build-essential``); without it the check says "not available here"."""
    def body() -> CheckResult:
        cc = _compiler()
        if cc is None:
            raise _not_done("Not available here: this check compiles your program, and no C compiler (gcc) "
                            "was found on this machine. The exercise is optional.",
                            "install gcc (on a board or on Debian/Ubuntu: sudo apt install build-essential), "
                            "restart the kernel and run this cell again.")
        with tempfile.TemporaryDirectory(prefix="rknnlab-lab07-") as folder:
            source = _read_source(path, folder)
            double = _double_library(cc)
            exe = os.path.join(folder, "program")
            _compile(cc, source, double, exe)
            n_frames = 5 + int.from_bytes(os.urandom(1), "little") % 5
            salt = _cases.salt()
            run, frames = _run(exe, folder, n_frames, salt)
        _judge_errors(run)
        _judge_capacity(run)
        _judge_exit(run)
        printed = _printed(run)
        _judge_lines(printed, n_frames)
        _judge_runs(run, n_frames)
        details = [_judge_values(printed, frames, salt)] + _judge_memory(run)
        return CheckResult(EX_C, "passed", "Your program compiles against the runtime's API, prints the right "
                           "outputs, allocates no output memory per frame and destroys everything it made.",
                           details)
    return _LAB.run(EX_C, body)
