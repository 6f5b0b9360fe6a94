"""The NPU's on-chip SRAM (RK3588): a page allocator, the placement of a plan in it,
and the two texts a board shows about it.

What Rockchip documents (the RK3588 NPU SRAM note, doc/RK3588_NPU_SRAM_usage.md in
rockchip-linux/rknpu2; User Guide V2.3.0 section 5.7; API reference V2.3.2 p.19):

- the RK3588 has 1 MB of SRAM, of which 956 KB can be given to IPs; the device tree
  gives the NPU its share, 4 KiB aligned;
- /sys/kernel/debug/rknpu/mm shows a bitmap, one character per 4 KiB page, and
  "SRAM total size: 978944, used: ..., free: ..." (978,944 B = 239 pages);
- RKNN_FLAG_ENABLE_SRAM places "the intermediate tensor memory ... on SRAM as much
  as possible"; rknn_create_mem2's RKNN_FLAG_MEMORY_TRY_ALLOC_SRAM tries SRAM and
  takes DDR memory for what does not fit (rknn_api.h);
- with RKNN_LOG_LEVEL=3 the runtime prints a table of the internal tensors: its
  header gives the SRAM part of the internal buffer as an address range starting
  where the internal buffer starts; each row's SramHit is the bytes of that tensor
  inside the range (the note's rows agree to the byte: the overlap of [Start, End)
  with that range); io tensors live in their own buffers and show "\\"; the footer's
  "Predict SRAM Hit RW Amount" is twice the sum of the SramHit column (the note's
  figures: 2 x 3,344,384 = 6,688,768) and "generally saves the read + write
  bandwidth" of the hits.

What the simulator assumes on top (ASSUMPTIONS A29, A53-A55): one allocator per SoC
for the whole process; the SRAM part of an internal buffer is its first pages, as
many as the largest free run of pages allows; a layer's DDR cycles fall by the
share of its traffic that hits SRAM.
"""
from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

#: SRAM the NPU may use, by SoC: the note's 956 KiB on rk3588 (the most the device
#: tree can give it; a board may give less), none elsewhere
SRAM_BYTES: Dict[str, int] = {"rk3588": 978_944}
#: the allocator's unit (the note: "1bit = 4KB")
SRAM_PAGE = 4096
#: pages per line of the bitmap text (as the note prints them)
_PAGES_PER_LINE = 32


@dataclass(frozen=True)
class SramBlock:
    """Pages [start, start + pages) of an allocator, holding ``nbytes`` of a buffer."""
    start: int
    pages: int
    nbytes: int


class SramAllocator:
    """The NPU SRAM of one SoC: a bitmap of 4 KiB pages."""

    def __init__(self, total_bytes: int) -> None:
        self.total_bytes = total_bytes
        self._used = [False] * (total_bytes // SRAM_PAGE)
        self._lock = threading.Lock()

    @property
    def free_bytes(self) -> int:
        with self._lock:
            return self._used.count(False) * SRAM_PAGE

    @property
    def used_bytes(self) -> int:
        with self._lock:
            return self._used.count(True) * SRAM_PAGE

    def _largest_free_run(self) -> Tuple[int, int]:
        best, start, run = (0, 0), 0, 0
        for page, used in enumerate(self._used + [True]):
            if used:
                if run > best[1]:
                    best = (start, run)
                run = 0
            else:
                if run == 0:
                    start = page
                run += 1
        return best

    def take(self, nbytes: int) -> Optional[SramBlock]:
        """As much of ``nbytes`` as the largest free run of pages holds (whole pages,
        the first of them), or None when no page is free."""
        if nbytes <= 0:
            return None
        with self._lock:
            start, run = self._largest_free_run()
            pages = min(run, -(-nbytes // SRAM_PAGE))
            if pages == 0:
                return None
            for page in range(start, start + pages):
                self._used[page] = True
            return SramBlock(start, pages, min(nbytes, pages * SRAM_PAGE))

    def give_back(self, block: SramBlock) -> None:
        with self._lock:
            for page in range(block.start, block.start + block.pages):
                self._used[page] = False

    def bitmap(self) -> str:
        """The text of /sys/kernel/debug/rknpu/mm, as the SRAM note shows it."""
        with self._lock:
            marks = "".join("*" if used else "." for used in self._used)
            used = self._used.count(True) * SRAM_PAGE
        lines = ['SRAM bitmap: "*" - used, "." - free (1bit = 4KB)']
        for line, first in enumerate(range(0, len(marks), _PAGES_PER_LINE)):
            lines.append(f"[{line:03d}] [{marks[first:first + _PAGES_PER_LINE]}]")
        lines.append(f"SRAM total size: {self.total_bytes}, used: {used}, free: {self.total_bytes - used}")
        return "\n".join(lines) + "\n"


_allocators: Dict[str, SramAllocator] = {}
_allocators_lock = threading.Lock()


def sram_for(soc: str) -> SramAllocator:
    """The process-wide SRAM allocator of ``soc`` (0 bytes on SoCs without NPU SRAM)."""
    with _allocators_lock:
        if soc not in _allocators:
            _allocators[soc] = SramAllocator(SRAM_BYTES.get(soc, 0))
        return _allocators[soc]


# ------------------------------------------------------------------ a plan in SRAM
@dataclass(frozen=True)
class TensorHit:
    """One row of the internal-tensor table: a feature tensor of the plan and the
    bytes of it that lie in SRAM (None: an io tensor, kept in its own buffer)."""
    layer_id: int
    user: str
    tensor: str
    dtype: str
    orig_shape: Tuple[int, ...]
    native_shape: Tuple[int, ...]
    start: int
    end: int
    starred: bool
    producer_layer_id: Optional[int]
    hit: Optional[int]


def tensor_hits(feature_tensors: Sequence[Mapping[str, Any]], io_names: Sequence[str],
                sram_bytes: int) -> List[TensorHit]:
    """SramHit of every row of a plan whose first ``sram_bytes`` lie in SRAM."""
    rows = []
    for row in feature_tensors:
        start, end = row["start"], row["end"]
        is_io = row["tensor"] in io_names
        hit = None if is_io else max(0, min(end, sram_bytes) - start)
        rows.append(TensorHit(row["layer_id"], row["user"], row["tensor"], row["dtype"],
                              tuple(row["orig_shape"]), tuple(row["native_shape"]), start, end,
                              bool(row.get("starred")), row.get("producer_layer_id"), hit))
    return rows


def hit_rw_bytes(hits: Sequence[TensorHit]) -> int:
    """The log's "Predict SRAM Hit RW Amount": read + write of every hit."""
    return 2 * sum(h.hit for h in hits if h.hit)


def layers_with_sram(layers: Sequence[Mapping[str, Any]], hits: Sequence[TensorHit]) -> List[Dict[str, Any]]:
    """The layer table with each NPU layer's DDR cycles cut by the share of its traffic
    that SRAM serves (ASSUMPTIONS A54): the hits of the tensors it reads (its rows) and
    of the tensor it writes (rows it produces, once per tensor), over its RW(KB); its
    total cycles stay max(DDR, NPU), as in every shipped report.  A layer the compiler
    gives 0 cycles also moves that share fewer bytes (its RW(KB) here), which is what
    the timing law times it by."""
    read: Dict[int, int] = {}
    written: Dict[int, Dict[str, int]] = {}
    for h in hits:
        if not h.hit:
            continue
        read[h.layer_id] = read.get(h.layer_id, 0) + h.hit
        if h.producer_layer_id is not None:
            written.setdefault(h.producer_layer_id, {})[h.tensor] = h.hit
    adjusted = []
    for layer in layers:
        saved = read.get(layer["id"], 0) + sum(written.get(layer["id"], {}).values())
        traffic = layer["rw_kb"] * 1024
        if layer["target"] != "NPU" or not saved or traffic <= 0:
            adjusted.append(dict(layer))
            continue
        kept = max(0.0, 1.0 - saved / traffic)
        ddr = math.floor(layer["cycles_ddr"] * kept)
        # the timing law times a 0-cycle layer by the bytes it moves through DDR (A20, A54)
        adjusted.append(dict(layer, cycles_ddr=ddr, cycles_total=max(ddr, layer["cycles_npu"]),
                             rw_kb=layer["rw_kb"] * kept if layer["cycles_total"] == 0 else layer["rw_kb"]))
    return adjusted


def _shape(shape: Sequence[int]) -> str:
    return "(" + ",".join(str(d) for d in shape) + ")"


def sram_log_text(hits: Sequence[TensorHit], allocated_bytes: int, internal_address: int,
                  io_addresses: Mapping[str, int], weight_size: int, internal_size: int) -> str:
    """The RKNN_LOG_LEVEL=3 SRAM table of one context, laid out as the SRAM note shows it:
    the SRAM pages given to the internal buffer (``allocated_bytes``, whole pages), one
    row per feature tensor, and the totals.  ``internal_address`` / ``io_addresses``: the (made-up) NPU addresses of the internal
    buffer and of each io tensor's own buffer."""
    header = ["ID", "User", "Tensor", "DataType", "OrigShape", "NativeShape"]
    cells = []
    for h in hits:
        base = io_addresses.get(h.tensor) if h.hit is None else None
        start = base if base is not None else internal_address + h.start
        end = start + (h.end - h.start)
        cells.append(([str(h.layer_id), h.user, h.tensor, h.dtype, _shape(h.orig_shape), _shape(h.native_shape)],
                      f"0x{start:08x}{'*' if h.starred else ' '}0x{end:08x} 0x{end - start:08x}",
                      "\\" if h.hit is None else f"0x{h.hit:08x}"))
    widths = [max([len(name)] + [len(c[0][i]) for c in cells]) for i, name in enumerate(header)]

    def left(fields: Sequence[str]) -> str:
        return " ".join(f.ljust(w) for f, w in zip(fields, widths))

    place_width = len("0x00000000 0x00000000 0x00000000")
    table_head = (f"{left(header)} | {'[Start       End)       Size'.rjust(place_width)} | "
                  f"{'SramHit'.rjust(10)}")
    rule = "-" * len(left(header)) + "-+-" + "-" * place_width + "-+-" + "-" * 10
    top = f"Total allocated Internal SRAM Size: {allocated_bytes}, Addr: [0x{internal_address:08x}, " \
          f"0x{internal_address + allocated_bytes:08x})"
    lines = ["-" * len(top), top, "-" * len(top), rule, table_head, rule]
    lines += [f"{left(fields)} | {place} | {hit.rjust(10)}" for fields, place, hit in cells]
    lines.append(rule)
    footer = [f"Total Weight Memory Size: {weight_size}",
              f"Total Internal Memory Size: {internal_size}",
              f"Predict SRAM Hit RW Amount: {hit_rw_bytes(hits)}"]
    lines += ["-" * 40] + footer + ["-" * 40]
    return "\n".join(lines) + "\n"


__all__ = ["SRAM_BYTES", "SRAM_PAGE", "SramAllocator", "SramBlock", "sram_for", "TensorHit",
           "tensor_hits", "hit_rw_bytes", "layers_with_sram", "sram_log_text"]
