"""Any rknnlab.profile table as text a person reads: units in the cells, the source under it."""
from __future__ import annotations

import math
import textwrap
from typing import Any, Optional, Sequence

#: columns that are fractions, shown as percentages
_SHARES = ("share", "split_share", "time_ratio", "share_of_time", "share_of_cycles", "error", "loo_error",
           "domain_share", "mismatch_share", "other_input_share")
#: columns that are ratios of two times, shown as "1.25x"
_RATIOS = ("speedup", "speedup_low", "speedup_high", "law")
#: columns that hold every repeat (a tuple): left out of the text
_RAW = ("ms",)
#: the source line wraps here: JupyterLab at 1366 px shows about 100 columns of output
SOURCE_WIDTH = 100


def _bytes(v: float) -> str:
    if abs(v) >= 2 ** 20:
        return f"{v / 2 ** 20:,.2f} MiB"
    if abs(v) >= 1024:
        return f"{v / 1024:,.1f} KiB"
    return f"{v:,.0f} B"


def _cell(column: str, v: Any) -> str:
    if isinstance(v, float) and math.isnan(v):
        return "-"
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return str(v)
    if column.endswith("_bytes") or column in ("bytes", "bytes_in", "bytes_out", "nbytes", "read_bytes"):
        return _bytes(v)
    if column in _RATIOS:
        return f"{v:.2f}x"
    if column in ("error", "loo_error"):
        return f"{v:+.1%}"
    if column in _SHARES:
        return f"{v:.1%}"
    if column.endswith("_us") or "_us_" in column:
        return f"{v:,.2f} us" if 0 < abs(v) < 1 else f"{v:,.1f} us"   # a sub-microsecond read stays visible
    if column.endswith("_ms") or "_ms_" in column:
        return f"{v:,.2f} ms"
    if isinstance(v, float):
        return f"{v:,.3g}" if abs(v) < 1000 else f"{v:,.0f}"
    return f"{v:,}"


def source_line(source: str, width: int = SOURCE_WIDTH) -> str:
    """"source: <source>", wrapped at ``width`` columns between words (a word longer
    than the line, such as a URL, stays whole on a line of its own)."""
    return textwrap.fill(f"source: {source}", width, break_long_words=False, break_on_hyphens=False)


def show(table: Any, columns: Optional[Sequence[str]] = None) -> str:
    """``table`` (any DataFrame rknnlab.profile returns) as aligned text: bytes in
    B/KiB/MiB, times with their unit, shares as percentages, the per-repeat column
    left out, and its source under it (wrapped at SOURCE_WIDTH columns between words),
    so a printed table never loses where its numbers came from."""
    shown = table.reset_index() if table.index.name else table
    cols = [c for c in (columns or shown.columns) if c not in _RAW]
    missing = [c for c in cols if c not in shown.columns]
    if missing:
        raise KeyError(f"no column {', '.join(missing)} in this table; it has {', '.join(map(str, shown.columns))}")
    text = shown[cols].apply(lambda col: col.map(lambda v: _cell(str(col.name), v))).to_string(index=False)
    return f"{text}\n{source_line(str(table.attrs.get('source', 'not recorded')))}"
