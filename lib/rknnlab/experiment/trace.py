"""Results as JSON traces: a run recorded on a board replays in any notebook.

Format: ``{"schema": "rknnlab.trace", "schema_version": 1, "meta": {...},
"variants": [...]}``, described by rknnlab/schemas/trace.schema.json.  Tables
are stored as columns (name -> list).  Loading validates the trace (with
jsonschema when installed, else a structural check of the same rules) and
refuses traces of a newer schema version with a clear message.  Never pickle.
"""
from __future__ import annotations

import gzip
import json
import math
import os
from pathlib import Path
from typing import Any, Dict, Union

from .result import STATUSES, Result, VariantRun

SCHEMA_NAME = "rknnlab.trace"
SCHEMA_VERSION = 1
SCHEMA_PATH = Path(__file__).resolve().parents[1] / "schemas" / "trace.schema.json"

#: columns a non-empty table must have
REQUIRED_COLUMNS = {
    "calls": ("function", "iteration", "stage", "t_start_ns", "duration_ns"),
    "iterations": ("iteration", "stage", "t_start_ns", "duration_ns"),
    "samples": ("t_ns",),
}

PathLike = Union[str, "os.PathLike[str]"]


class TraceError(ValueError):
    """A trace that is unreadable, malformed, or from a newer rknnlab."""


def _nan_to_none(x: Any) -> Any:
    if isinstance(x, float) and (math.isnan(x) or math.isinf(x)):
        return None
    if isinstance(x, dict):
        return {k: _nan_to_none(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_nan_to_none(v) for v in x]
    return x


def result_to_dict(result: Result) -> Dict[str, Any]:
    return _nan_to_none({"schema": SCHEMA_NAME, "schema_version": SCHEMA_VERSION,
                         "meta": result.meta, "variants": [r.to_dict() for r in result.runs]})


def save(result: Result, path: PathLike) -> Path:
    """Write ``result`` to ``path`` (.json, or .json.gz compressed)."""
    data = result_to_dict(result)
    validate(data)
    text = json.dumps(data, separators=(",", ":"), allow_nan=False)
    p = Path(path)
    if p.suffix == ".gz":
        p.write_bytes(gzip.compress(text.encode()))
    else:
        p.write_text(text)
    return p


def load(path: PathLike) -> Result:
    """Read and validate a trace written by :func:`save`."""
    p = Path(path)
    try:
        raw = p.read_bytes()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        data = json.loads(raw.decode("utf-8"))
    except FileNotFoundError:
        raise TraceError(f"no trace file {p}") from None
    except (OSError, UnicodeDecodeError, ValueError, EOFError) as exc:
        raise TraceError(f"{p} is not a JSON trace: {exc}") from None
    return from_dict(data, where=str(p))


def from_dict(data: Any, where: str = "trace") -> Result:
    validate(data, where)
    return Result(data["meta"], [VariantRun.from_dict(v) for v in data["variants"]])


def schema() -> Dict[str, Any]:
    return json.loads(SCHEMA_PATH.read_text())


def validate(data: Any, where: str = "trace") -> None:
    """Raise TraceError unless ``data`` is a valid trace of our schema version."""
    if not isinstance(data, dict) or data.get("schema") != SCHEMA_NAME:
        raise TraceError(f"{where} is not an rknnlab trace (expected \"schema\": \"{SCHEMA_NAME}\")")
    version = data.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise TraceError(f"{where}: schema_version must be an integer, got {version!r}")
    if version > SCHEMA_VERSION:
        raise TraceError(f"{where} was written by a newer rknnlab (trace schema version {version}); "
                         f"this rknnlab reads version {SCHEMA_VERSION}: upgrade rknnlab to load it")
    if version < 1:
        raise TraceError(f"{where}: schema_version {version} does not exist (the first is 1)")
    try:
        import jsonschema
    except ImportError:
        _structural_check(data, where)
    else:
        try:
            # the schema types every column; checking a few values per column is
            # enough there (full traces hold ~10^5 values), _check_tables does the rest
            jsonschema.validate(_skeleton(data), schema())
        except jsonschema.ValidationError as exc:
            at = "/".join(str(p) for p in exc.absolute_path)
            raise TraceError(f"{where} is malformed at {at or '<top>'}: {exc.message}") from None
    _check_tables(data, where)


def _skeleton(value: Any, keep: int = 16) -> Any:
    """``value`` with every list cut to its first ``keep`` items (recursively)."""
    if isinstance(value, dict):
        return {k: _skeleton(v, keep) for k, v in value.items()}
    if isinstance(value, list):
        return [_skeleton(v, keep) for v in value[:keep]]
    return value


def _need(cond: bool, where: str, what: str) -> None:
    if not cond:
        raise TraceError(f"{where} is malformed: {what}")


def _structural_check(data: Dict[str, Any], where: str) -> None:
    """The schema's rules, for machines without jsonschema."""
    meta = data.get("meta")
    _need(isinstance(meta, dict), where, "'meta' must be an object")
    for key in ("backend", "source", "board", "runtime_versions", "model", "rknnlab_version",
                "host", "parameters"):
        _need(key in meta, where, f"meta has no '{key}'")
    _need(isinstance(meta["model"], dict) and all(k in meta["model"] for k in ("name", "soc", "sha256")),
          where, "meta/model needs name, soc and sha256")
    params = meta["parameters"]
    _need(isinstance(params, dict), where, "meta/parameters must be an object")
    for key in ("iterations", "warmup", "sample_hz", "seed"):
        _need(key in params, where, f"meta/parameters has no '{key}'")
    _need(isinstance(data.get("variants"), list), where, "'variants' must be a list")


def _check_tables(data: Dict[str, Any], where: str) -> None:
    for i, v in enumerate(data["variants"]):
        vw = f"variants/{i}"
        _need(isinstance(v, dict), where, f"{vw} must be an object")
        _need(isinstance(v.get("name"), str) and v["name"], where, f"{vw} has no name")
        _need(v.get("status") in STATUSES, where, f"{vw}/status must be one of {', '.join(STATUSES)}")
        for table, required in REQUIRED_COLUMNS.items():
            cols = v.get(table)
            _need(isinstance(cols, dict), where, f"{vw}/{table} must be an object of columns")
            lengths = set()
            for name, col in cols.items():
                _need(isinstance(col, list), where, f"{vw}/{table}/{name} must be a list")
                lengths.add(len(col))
            _need(len(lengths) <= 1, where, f"{vw}/{table}: columns of different lengths {sorted(lengths)}")
            if lengths and lengths != {0}:
                missing = [c for c in required if c not in cols]
                _need(not missing, where, f"{vw}/{table} lacks the column(s) {', '.join(missing)}")
    names = [v["name"] for v in data["variants"]]
    _need(len(set(names)) == len(names), where, "two variants share a name")
