"""Is this a Rockchip board, which SoC, which NPU driver and runtime (what
``python -m rknnlab doctor`` reports; README.md, "On a board").

Everything here only *reads* the system (device tree, sysfs, debugfs, /dev, the
librknnrt.so file's bytes) and never loads librknnrt.so, so it is safe anywhere. Each
function takes ``root``, a path prefix (default "/"), so the tests can build a fake
RK3588 or PC tree under a temporary directory; paths returned are as seen on disk,
i.e. with that prefix.

Missing files, permission errors and odd contents never raise: the value becomes
None and :attr:`BoardInfo.notes` says why ("needs root", "missing", ...).

    >>> from rknnlab import board
    >>> b = board.read_board()
    >>> board.choose_backend("auto", b)
    ('sim', 'no RKNPU device node and no librknnrt.so: ...')
"""
from __future__ import annotations

import glob
import os
import platform
import re
from dataclasses import asdict, dataclass, field
from typing import Dict, List, Mapping, Optional, Tuple

NEEDS_ROOT = "needs root"
MISSING = "missing"

ENV_BACKEND = "RKNNLAB_BACKEND"
BACKENDS = ("auto", "native", "sim")

#: env var that names librknnrt.so explicitly (also honoured by rknn-toolkit-lite2)
ENV_LIBRKNNRT = "LIBRKNNRT_PATH"
#: where librknnrt.so is looked for when LIBRKNNRT_PATH is not set (in this order).
#: The native backend should load the file :func:`find_librknnrt` names, so that the
#: doctor and the backend always agree.
LIBRKNNRT_CANDIDATES = (
    "/usr/lib/librknnrt.so",
    "/usr/lib64/librknnrt.so",
    "/usr/local/lib/librknnrt.so",
    "/usr/lib/aarch64-linux-gnu/librknnrt.so",
)
LIBRKNNRT_VERSION_MARKER = b"librknnrt version:"

#: SoCs that run librknnrt (RKNPU2) and their NPU core counts (facts sheet, section 3).
#: None: runs librknnrt, core count not in our facts sheet.
SOC_NPU_CORES: Dict[str, Optional[int]] = {
    "rk3588": 3,
    "rk3576": 2,
    "rk3568": 1,
    "rk3566": 1,
    "rk3562": None,
}
#: variants that share a listed SoC's NPU and its .rknn target
SOC_ALIASES = {"rk3588s": "rk3588"}

#: where the rknpu driver publishes version/load/freq: debugfs (root only) and, on
#: kernels built with CONFIG_ROCKCHIP_RKNPU_PROC_FS, procfs (world-readable)
RKNPU_INFO_DIRS = ("/sys/kernel/debug/rknpu", "/proc/rknpu")

_DT_DIRS = ("/proc/device-tree", "/sys/firmware/devicetree/base")

_ELF_MACHINES = {3: "x86", 40: "arm (32-bit)", 62: "x86_64", 183: "aarch64", 243: "riscv"}


# --------------------------------------------------------------------------- helpers
def _p(root: str, path: str) -> str:
    """``path`` (absolute, as on a real system) under the prefix ``root``."""
    if not root or root == "/":
        return path
    return os.path.join(root, path.lstrip("/"))


def _note(notes: Optional[Dict[str, str]], key: str, text: str) -> None:
    if notes is not None and key not in notes:
        notes[key] = text


def _read(path: str, limit: int = 1 << 16) -> Tuple[Optional[bytes], Optional[str]]:
    """(bytes, None) or (None, why): why is "missing", "needs root" or "unreadable (...)"."""
    try:
        with open(path, "rb") as f:
            return f.read(limit), None
    except PermissionError:
        return None, NEEDS_ROOT
    except FileNotFoundError:
        return None, MISSING
    except IsADirectoryError:
        return None, "unreadable (a directory)"
    except OSError as e:  # EINVAL from some sysfs/debugfs files, EIO, ...
        return None, f"unreadable ({e.strerror or e})"


def _read_text(path: str) -> Tuple[Optional[str], Optional[str]]:
    data, why = _read(path)
    if data is None:
        return None, why
    text = data.replace(b"\x00", b" ").decode("utf-8", "replace").strip()
    return text, None


def _exists(path: str) -> bool:
    try:
        os.stat(path)
        return True
    except OSError:
        return False


def _driver_name(device_dir: str) -> Optional[str]:
    """Name of the driver bound to a sysfs device dir (its ``driver`` symlink's target
    name, else ``DRIVER=`` in its uevent)."""
    try:
        return os.path.basename(os.readlink(os.path.join(device_dir, "driver")).rstrip("/"))
    except OSError:
        pass
    text, _ = _read_text(os.path.join(device_dir, "uevent"))
    if text:
        for line in text.splitlines():
            if line.startswith("DRIVER="):
                return line.split("=", 1)[1].strip() or None
    return None


# --------------------------------------------------------------------------- device tree
def read_compatible(root: str = "/", notes: Optional[Dict[str, str]] = None) -> List[str]:
    """The device tree's root ``compatible`` strings, most specific first
    (e.g. ["radxa,rock-5b", "rockchip,rk3588"]); [] where there is no device tree."""
    why = MISSING
    for d in _DT_DIRS:
        data, why_here = _read(_p(root, d + "/compatible"))
        if data is not None:
            return [s.decode("utf-8", "replace").strip() for s in data.split(b"\x00") if s.strip()]
        if why_here != MISSING:
            why = why_here
    _note(notes, "compatible", "no device tree" if why == MISSING else why)
    return []


def soc_from_compatible(compatible: List[str]) -> Tuple[Optional[str], Optional[str]]:
    """(soc, variant) from compatible strings: ("rk3588", "rk3588s") for an RK3588S
    board, ("rk3588", None) for an RK3588 one, (None, None) if no Rockchip SoC is named.
    SoCs outside :data:`SOC_NPU_CORES` are returned as named (e.g. "rk3399")."""
    found: Optional[str] = None
    for s in compatible:  # exact SoC entries, e.g. "rockchip,rk3588"
        m = re.fullmatch(r"rockchip,(r[kv]\d{4}[a-z]?)", s.strip().lower())
        if m:
            found = m.group(1)
            break
    if found is None:  # board entries that embed the SoC, e.g. "rockchip,rk3588s-orangepi-5"
        for s in compatible:
            m = re.match(r"rockchip,(r[kv]\d{4}[a-z]?)\b", s.strip().lower())
            if m:
                found = m.group(1)
                break
    if found is None:
        return None, None
    if found in SOC_ALIASES:
        return SOC_ALIASES[found], found
    return found, None


def read_model(root: str = "/", notes: Optional[Dict[str, str]] = None) -> Optional[str]:
    """The board's model name from the device tree ("Radxa ROCK 5B"); on a PC, the
    DMI vendor and product name where readable; None otherwise."""
    for d in _DT_DIRS:
        text, _ = _read_text(_p(root, d + "/model"))
        if text:
            return text
    parts = []
    for f in ("sys_vendor", "product_name"):
        text, _ = _read_text(_p(root, "/sys/class/dmi/id/" + f))
        if text and text.lower() not in ("to be filled by o.e.m.", "default string", "system product name"):
            parts.append(text)
    if parts:
        return " ".join(dict.fromkeys(parts))
    _note(notes, "model", MISSING)
    return None


# --------------------------------------------------------------------------- NPU device
def find_npu_device(root: str = "/", notes: Optional[Dict[str, str]] = None
                    ) -> Tuple[Optional[str], List[str], Optional[str]]:
    """(device node, all RKNPU nodes, driver name).

    The vendor rknpu driver registers a DRM device: /sys/class/drm/cardN and renderDM
    whose device's driver is "RKNPU"; the nodes are /dev/dri/cardN (usually card1) and
    /dev/dri/renderDM (usually renderD129). Old kernels have a misc device /dev/rknpu.
    A card node is preferred as *the* device node. The mainline "rocket" accel driver
    is reported as the driver but gives no device node (librknnrt does not talk to it).
    """
    nodes: List[str] = []
    absent: List[str] = []
    driver: Optional[str] = None
    for entry in sorted(glob.glob(_p(root, "/sys/class/drm/*"))):
        drv = _driver_name(os.path.join(entry, "device"))
        if drv and drv.lower() == "rknpu":
            driver = "rknpu"
            node = _p(root, "/dev/dri/" + os.path.basename(entry))
            (nodes if _exists(node) else absent).append(node)
    misc = _p(root, "/dev/rknpu")
    if _exists(misc):
        nodes.append(misc)
        driver = driver or "rknpu"

    if driver is None:
        # the driver may be there without the sysfs links we look for
        evidence = [d for d in RKNPU_INFO_DIRS + ("/sys/module/rknpu",) if os.path.isdir(_p(root, d))]
        if evidence:
            driver = "rknpu"
            guesses = [_p(root, n) for n in ("/dev/dri/card1", "/dev/dri/renderD129")]
            nodes = [g for g in guesses if _exists(g)]
            if nodes:
                _note(notes, "npu_device", f"guessed from {evidence[0]} (no RKNPU link under /sys/class/drm)")

    if driver is None:
        for entry in sorted(glob.glob(_p(root, "/sys/class/accel/*"))):
            drv = _driver_name(os.path.join(entry, "device"))
            if drv and drv.lower() == "rocket":
                driver = "rocket"
                _note(notes, "npu_device", "the NPU is driven by the mainline 'rocket' driver; "
                      "librknnrt.so needs Rockchip's vendor rknpu driver")
                break

    cards = [n for n in nodes if "/card" in n]
    node = (cards or nodes or [None])[0]
    if node is None:
        if absent:
            _note(notes, "npu_device", f"the rknpu driver is loaded but {absent[0]} does not exist "
                  "(in a container? pass the device through)")
        else:
            _note(notes, "npu_device", MISSING)
    return node, nodes, driver


def read_driver_version(root: str = "/", notes: Optional[Dict[str, str]] = None) -> Optional[str]:
    """The rknpu driver's version ("0.9.8"), from debugfs (root only), procfs or
    /sys/module/rknpu/version; None with a note ("needs root", "missing") otherwise."""
    whys = []
    paths = [d + "/version" for d in RKNPU_INFO_DIRS] + ["/sys/module/rknpu/version"]
    for path in paths:
        text, why = _read_text(_p(root, path))
        if text:
            m = re.search(r"v?(\d+\.\d+\.\d+)", text)
            return m.group(1) if m else text
        whys.append((path, why))
    blocked = [p for p, w in whys if w == NEEDS_ROOT]
    if blocked:
        _note(notes, "driver_version", f"{NEEDS_ROOT} ({blocked[0]})")
    else:
        odd = [f"{w} ({p})" for p, w in whys if w not in (MISSING, None)]
        _note(notes, "driver_version", odd[0] if odd else MISSING)
    return None


def read_npu_load(root: str = "/", notes: Optional[Dict[str, str]] = None
                  ) -> Tuple[Optional[str], List[int]]:
    """(text, per-core percent) from rknpu's ``load`` file, e.g.
    ("Core0: 12%, Core1: 0%, Core2: 0%", [12, 0, 0])."""
    whys = []
    for d in RKNPU_INFO_DIRS:
        path = d + "/load"
        text, why = _read_text(_p(root, path))
        if text:
            body = re.sub(r"^\s*NPU load:\s*", "", text)
            body = re.sub(r"\s+", " ", body).strip().rstrip(",")
            return body, [int(x) for x in re.findall(r"(\d+)\s*%", body)]
        whys.append((path, why))
    blocked = [p for p, w in whys if w == NEEDS_ROOT]
    _note(notes, "npu_load", f"{NEEDS_ROOT} ({blocked[0]})" if blocked else MISSING)
    return None, []


def read_npu_freq(root: str = "/", notes: Optional[Dict[str, str]] = None
                  ) -> Tuple[Optional[int], Optional[int], Optional[str]]:
    """(current Hz, max Hz, source path): devfreq fdab0000.npu (RK3588), else any
    devfreq whose name contains "npu", else rknpu's ``freq`` file."""
    cands = [_p(root, "/sys/class/devfreq/fdab0000.npu")]
    cands += [d for d in sorted(glob.glob(_p(root, "/sys/class/devfreq/*")))
              if "npu" in os.path.basename(d).lower() and d not in cands]
    whys = []
    for d in cands:
        text, why = _read_text(os.path.join(d, "cur_freq"))
        if text and text.isdigit():
            mx, _ = _read_text(os.path.join(d, "max_freq"))
            return int(text), (int(mx) if mx and mx.isdigit() else None), os.path.join(d, "cur_freq")
        whys.append(why)
    for d in RKNPU_INFO_DIRS:
        path = _p(root, d + "/freq")
        text, why = _read_text(path)
        if text and text.isdigit():
            return int(text), None, path
        whys.append(why)
    _note(notes, "npu_freq", NEEDS_ROOT if NEEDS_ROOT in whys else MISSING)
    return None, None, None


#: the rknpu driver's SRAM bitmap (RK3588 with CONFIG_ROCKCHIP_RKNPU_SRAM): 1 bit per 4 KiB
SRAM_BITMAP = "/sys/kernel/debug/rknpu/mm"


def read_sram_bitmap(root: str = "/") -> Tuple[Optional[str], Optional[str]]:
    """(text, None) of /sys/kernel/debug/rknpu/mm, or (None, why): "needs root" (debugfs is
    readable by root only: run as root, or ``sudo cat /sys/kernel/debug/rknpu/mm``),
    "missing" (no debugfs mounted, a kernel without the rknpu SRAM support, or no
    board), or "unreadable (...)"."""
    data, why = _read(_p(root, SRAM_BITMAP))
    if data is None:
        return None, why
    return data.decode("utf-8", "replace"), None


# --------------------------------------------------------------------------- runtime
def find_librknnrt(root: str = "/", env: Optional[Mapping[str, str]] = None,
                   notes: Optional[Dict[str, str]] = None) -> Optional[str]:
    """Path of librknnrt.so: LIBRKNNRT_PATH if set (only that file), else the first of
    :data:`LIBRKNNRT_CANDIDATES` that exists. Does not load it."""
    env = os.environ if env is None else env
    explicit = env.get(ENV_LIBRKNNRT)
    if explicit:
        path = _p(root, explicit) if os.path.isabs(explicit) else explicit
        if os.path.isfile(path):
            return path
        _note(notes, "librknnrt", f"{ENV_LIBRKNNRT}={explicit} is not a file")
        return None
    for c in LIBRKNNRT_CANDIDATES:
        path = _p(root, c)
        if os.path.isfile(path):
            return path
    _note(notes, "librknnrt", "not found in " + ", ".join(LIBRKNNRT_CANDIDATES))
    return None


def librknnrt_version(path: str) -> Optional[str]:
    """The version string librknnrt.so embeds ("2.3.2 (429f97ae6b@2025-04-09T09:09:27)"),
    found by scanning the file's bytes for ``librknnrt version:``; None if absent."""
    marker = LIBRKNNRT_VERSION_MARKER
    keep = len(marker) + 200
    try:
        with open(path, "rb") as f:
            tail = b""
            while True:
                chunk = f.read(1 << 20)
                if not chunk:
                    return None
                buf = tail + chunk
                i = buf.find(marker)
                if i >= 0:
                    rest = buf[i + len(marker):]
                    if len(rest) < 200:
                        rest += f.read(200)
                    rest = re.split(rb"[\x00\n\r]", rest, maxsplit=1)[0][:200]
                    return rest.decode("utf-8", "replace").strip() or None
                tail = buf[-keep:]
    except OSError:
        return None


def elf_arch(path: str) -> Optional[str]:
    """The CPU a shared library is built for ("aarch64", "arm (32-bit)", ...), from
    its ELF header; None if it is not an ELF file."""
    data, _ = _read(path, 20)
    if not data or len(data) < 20 or data[:4] != b"\x7fELF":
        return None
    order = "little" if data[5] == 1 else "big"
    machine = int.from_bytes(data[18:20], order)
    return _ELF_MACHINES.get(machine, f"ELF machine {machine}")


def toolkit_lite2_version() -> Optional[str]:
    """Installed version of rknn-toolkit-lite2 (the ``rknnlite`` package), or None."""
    try:
        from importlib import metadata
    except ImportError:  # pragma: no cover - Python < 3.8
        return None
    for name in ("rknn-toolkit-lite2", "rknn_toolkit_lite2"):
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
        except Exception:  # a broken installation's metadata
            return None
    return None


def read_meminfo(root: str = "/") -> Dict[str, int]:
    """/proc/meminfo as {field: kB}; {} if unreadable."""
    text, _ = _read_text(_p(root, "/proc/meminfo"))
    out: Dict[str, int] = {}
    for line in (text or "").splitlines():
        m = re.match(r"(\w+):\s+(\d+)", line)
        if m:
            out[m.group(1)] = int(m.group(2))
    return out


# --------------------------------------------------------------------------- the board
@dataclass
class BoardInfo:
    """What :func:`read_board` found. None means unknown; ``notes[field]`` says why."""
    is_rockchip: bool = False
    soc: Optional[str] = None               # "rk3588" (also for an RK3588S)
    soc_variant: Optional[str] = None       # "rk3588s" where that is what the tree names
    npu_cores: Optional[int] = None
    model: Optional[str] = None             # "Radxa ROCK 5B"
    compatible: List[str] = field(default_factory=list)
    npu_device: Optional[str] = None        # "/dev/dri/card1"
    npu_device_nodes: List[str] = field(default_factory=list)
    npu_device_access: Optional[bool] = None  # can this user open it read/write?
    npu_driver: Optional[str] = None        # "rknpu" (vendor) or "rocket" (mainline)
    driver_version: Optional[str] = None    # "0.9.8"
    npu_load: Optional[str] = None          # "Core0: 0%, Core1: 0%, Core2: 0%"
    npu_load_percent: List[int] = field(default_factory=list)
    npu_freq_hz: Optional[int] = None
    npu_max_freq_hz: Optional[int] = None
    npu_freq_source: Optional[str] = None
    librknnrt_path: Optional[str] = None
    librknnrt_version: Optional[str] = None  # "2.3.2 (429f97ae6b@...)"
    librknnrt_arch: Optional[str] = None     # "aarch64"
    toolkit_lite2_version: Optional[str] = None
    machine: str = ""                        # "aarch64", "x86_64"
    kernel: str = ""
    mem_total_kb: Optional[int] = None
    cma_total_kb: Optional[int] = None
    root: str = "/"
    notes: Dict[str, str] = field(default_factory=dict)

    @property
    def rknpu_present(self) -> bool:
        return self.npu_driver == "rknpu" or self.npu_device is not None

    @property
    def librknnrt_version_number(self) -> Optional[str]:
        """Just the "2.3.2" part of librknnrt_version."""
        if not self.librknnrt_version:
            return None
        m = re.match(r"\s*(\d+(?:\.\d+)*)", self.librknnrt_version)
        return m.group(1) if m else None

    def to_dict(self) -> dict:
        return asdict(self)


def read_board(root: str = "/", machine: Optional[str] = None, kernel: Optional[str] = None,
               env: Optional[Mapping[str, str]] = None) -> BoardInfo:
    """Read everything :class:`BoardInfo` holds. Never raises for a missing or
    unreadable file. ``machine``/``kernel`` default to this machine's uname (for a fake
    ``root``, the kernel release is read from its /proc/sys/kernel/osrelease if there)."""
    notes: Dict[str, str] = {}
    b = BoardInfo(root=root, notes=notes)
    b.compatible = read_compatible(root, notes)
    b.is_rockchip = any(s.lower().startswith("rockchip,") for s in b.compatible)
    b.soc, b.soc_variant = soc_from_compatible(b.compatible)
    if b.soc is not None:
        b.npu_cores = SOC_NPU_CORES.get(b.soc)
        if b.soc not in SOC_NPU_CORES:
            notes["soc"] = f"{b.soc} does not run librknnrt (RKNPU2 SoCs: {', '.join(SOC_NPU_CORES)})"
    b.model = read_model(root, notes)

    b.npu_device, b.npu_device_nodes, b.npu_driver = find_npu_device(root, notes)
    if b.npu_device is not None:
        b.npu_device_access = os.access(b.npu_device, os.R_OK | os.W_OK)

    if b.is_rockchip or b.rknpu_present:
        b.driver_version = read_driver_version(root, notes)
        b.npu_load, b.npu_load_percent = read_npu_load(root, notes)
        b.npu_freq_hz, b.npu_max_freq_hz, b.npu_freq_source = read_npu_freq(root, notes)
    else:
        for key in ("driver_version", "npu_load", "npu_freq"):
            notes.setdefault(key, "no RKNPU driver")

    b.librknnrt_path = find_librknnrt(root, env, notes)
    if b.librknnrt_path:
        b.librknnrt_version = librknnrt_version(b.librknnrt_path)
        b.librknnrt_arch = elf_arch(b.librknnrt_path)
        if b.librknnrt_version is None:
            notes["librknnrt_version"] = "no 'librknnrt version:' string in the file"
    b.toolkit_lite2_version = toolkit_lite2_version()

    b.machine = machine or platform.machine()
    if kernel is None:
        osrel = None
        if root not in ("", "/"):
            osrel, _ = _read_text(_p(root, "/proc/sys/kernel/osrelease"))
        kernel = osrel or platform.release()
    b.kernel = kernel
    mem = read_meminfo(root)
    b.mem_total_kb = mem.get("MemTotal")
    b.cma_total_kb = mem.get("CmaTotal")
    return b


# --------------------------------------------------------------------------- backend
class BackendUnavailableError(RuntimeError):
    """The native backend was asked for, but librknnrt.so or the NPU device is missing."""


def native_missing(board: BoardInfo) -> List[Tuple[str, str]]:
    """What the native backend lacks on this board: [(what, why), ...] ([] if nothing)."""
    missing = []
    if not board.librknnrt_path:
        missing.append(("librknnrt.so", board.notes.get("librknnrt", "not found")))
    if not board.npu_device:
        why = board.notes.get("npu_device", MISSING)
        if why == MISSING:
            why = ("not a Rockchip board" if not board.is_rockchip
                   else "no /dev/dri node whose driver is rknpu, and no /dev/rknpu")
        missing.append(("RKNPU device node", why))
    return missing


def choose_backend(requested: str = "auto", board: Optional[BoardInfo] = None,
                   env: Optional[Mapping[str, str]] = None) -> Tuple[str, str]:
    """("native" | "sim", reason in words).

    native needs librknnrt.so *and* an RKNPU device node. ``requested`` is "auto",
    "native" or "sim"; with "auto", the environment variable RKNNLAB_BACKEND (if set)
    decides instead. Asking for native where it cannot work raises
    :class:`BackendUnavailableError` saying what is missing.
    """
    env = os.environ if env is None else env
    requested = (requested or "auto").strip().lower()
    via = ""
    if requested == "auto":
        forced = (env.get(ENV_BACKEND) or "").strip().lower()
        if forced:
            if forced not in BACKENDS:
                raise ValueError(f"{ENV_BACKEND}={env.get(ENV_BACKEND)!r}: expected one of {', '.join(BACKENDS)}")
            requested = forced
            via = f" ({ENV_BACKEND}={forced})"
    if requested not in BACKENDS:
        raise ValueError(f"backend {requested!r}: expected one of {', '.join(BACKENDS)}")
    if requested == "sim":
        return "sim", f"the simulator was asked for{via or ' explicitly'}"

    b = board if board is not None else read_board()
    missing = native_missing(b)
    if requested == "native":
        if missing:
            raise BackendUnavailableError(
                f"the native backend was asked for{via} but it needs "
                + " and ".join(f"{what} ({why})" for what, why in missing)
                + f". Copy librknnrt.so (RKNPU2 runtime 2.3.x) to /usr/lib or set {ENV_LIBRKNNRT}; "
                "the device node needs Rockchip's rknpu kernel driver. "
                f"Run `python -m rknnlab doctor` for details, or use the simulator ({ENV_BACKEND}=sim).")
        return "native", f"asked for{via}: " + _native_reason(b)
    if not missing:
        return "native", _native_reason(b)
    if len(missing) == 2 and missing[1][1] == "not a Rockchip board":
        what = "not a Rockchip board, no librknnrt.so"
    else:
        what = "no " + " and no ".join(f"{w} ({why})" for w, why in missing)
    return "sim", what + ": the simulator stands in for the NPU"


def _native_reason(b: BoardInfo) -> str:
    ver = f" {b.librknnrt_version_number}" if b.librknnrt_version_number else ""
    return f"librknnrt.so{ver} at {b.librknnrt_path} and NPU device {b.npu_device}"


def source_label(backend: str, soc: str, board: Optional[BoardInfo] = None) -> str:
    """The line every figure and table carries: "simulated RK3588 — rknnlab sim",
    or the board's model and SoC ("Radxa ROCK 5B (RK3588, NPU)")."""
    if backend == "sim":
        return f"simulated {soc.upper()} — rknnlab sim"
    b = board or read_board()
    name = b.model or (b.soc or soc or "unknown board").upper()
    return f"{name} ({(b.soc_variant or b.soc or soc or '?').upper()}, NPU)"
