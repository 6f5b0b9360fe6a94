"""Fake system trees (device tree, sysfs, debugfs, /dev, /usr/lib) for the board and
doctor tests: what an RK3588 board, a PC and odd cases look like from the files
rknnlab.board reads. Not a test module (no test_ prefix)."""
from __future__ import annotations

import os
from pathlib import Path

RK_VERSION = b"librknnrt version: 2.3.2 (429f97ae6b@2025-04-09T09:09:27)"


def write(root: Path, rel: str, data) -> Path:
    p = root / rel.lstrip("/")
    p.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    p.write_bytes(data)
    return p


def link(root: Path, rel: str, target: str) -> Path:
    """A symlink like sysfs has (relative, may dangle: only its name is read)."""
    p = root / rel.lstrip("/")
    p.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(target, p)
    return p


def fake_elf(machine: int = 183, size: int = 4096, payload: bytes = RK_VERSION,
             at: int = 2048) -> bytes:
    """Bytes that start like a little-endian 64-bit ELF for ``machine`` (183 aarch64,
    40 arm, 62 x86_64) and carry ``payload`` + NUL at offset ``at``."""
    head = b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8) + (3).to_bytes(2, "little") \
        + machine.to_bytes(2, "little")
    buf = bytearray(max(size, at + len(payload) + 1))
    buf[: len(head)] = head
    if payload:
        buf[at: at + len(payload)] = payload
        buf[at + len(payload)] = 0
    return bytes(buf)


def runtime_version(version: str) -> bytes:
    """The version string a librknnrt.so of ``version`` carries (for fake_elf's payload)."""
    return f"librknnrt version: {version} (429f97ae6b@2025-04-09T09:09:27)".encode()


def fake_rknn(toolkit: str = "2.3.2", size: int = 2048) -> bytes:
    """Bytes that start like a .rknn and name their maker as rknn-toolkit2 ``toolkit`` does:
    a length-prefixed '<toolkit>(compiler version: <toolkit> (<commit>@<date>))' string."""
    maker = f"{toolkit}(compiler version: {toolkit} (e045de294f@2025-04-07T19:48:25))".encode()
    head = b"RKNN" + bytes(60) + len(maker).to_bytes(4, "little") + maker + b"\x00"
    return head + bytes(max(0, size - len(head)))


def drm(root: Path, name: str, driver: str, node: bool = True) -> None:
    link(root, f"/sys/class/drm/{name}/device/driver", f"../../../../bus/platform/drivers/{driver}")
    if node:
        write(root, f"/dev/dri/{name}", b"")


def rk3588_board(root: Path, compatible=(b"radxa,rock-5b", b"rockchip,rk3588"),
                 model: bytes = b"Radxa ROCK 5B", lib: bool = True) -> Path:
    """An RK3588 board on a vendor kernel, as root sees it."""
    base = "/sys/firmware/devicetree/base"
    write(root, base + "/compatible", b"\x00".join(compatible) + b"\x00")
    write(root, base + "/model", model + b"\x00")
    (root / "proc").mkdir(parents=True, exist_ok=True)
    os.symlink("../sys/firmware/devicetree/base", root / "proc" / "device-tree")
    drm(root, "card0", "rockchip-drm")
    drm(root, "card1", "RKNPU")
    drm(root, "renderD128", "rockchip-drm")
    drm(root, "renderD129", "RKNPU")
    (root / "sys/class/drm/card0-HDMI-A-1").mkdir(parents=True)
    write(root, "/sys/class/drm/version", "drm 1.1.0 20060810\n")
    write(root, "/sys/kernel/debug/rknpu/version", "RKNPU driver: v0.9.8\n")
    write(root, "/sys/kernel/debug/rknpu/load", "NPU load:  Core0: 12%, Core1:  0%, Core2:  0%,\n")
    write(root, "/sys/kernel/debug/rknpu/freq", "1000000000\n")
    write(root, "/sys/class/devfreq/fdab0000.npu/cur_freq", "1000000000\n")
    write(root, "/sys/class/devfreq/fdab0000.npu/max_freq", "1000000000\n")
    write(root, "/sys/class/devfreq/fb000000.gpu/cur_freq", "300000000\n")
    write(root, "/proc/meminfo", "MemTotal:       16337380 kB\nMemFree:        14000000 kB\n"
                                 "CmaTotal:          65536 kB\nCmaFree:           60000 kB\n")
    write(root, "/proc/sys/kernel/osrelease", "6.1.75-rockchip-rk3588\n")
    if lib:
        write(root, "/usr/lib/librknnrt.so", fake_elf())
    return root


def pc(root: Path) -> Path:
    """An x86_64 PC with an Intel GPU and no Rockchip anything."""
    write(root, "/sys/class/dmi/id/sys_vendor", "LENOVO\n")
    write(root, "/sys/class/dmi/id/product_name", "ThinkPad T14\n")
    link(root, "/sys/class/drm/card0/device/driver", "../../../bus/pci/drivers/i915")
    write(root, "/dev/dri/card0", b"")
    write(root, "/dev/dri/renderD128", b"")
    write(root, "/proc/meminfo", "MemTotal:       32768000 kB\nMemFree:        20000000 kB\n")
    write(root, "/proc/sys/kernel/osrelease", "6.1.0-18-amd64\n")
    return root
