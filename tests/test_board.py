"""rknnlab.board on fake system trees: an RK3588 board, a PC, unreadable files, and
the backend choice that follows from them."""
from __future__ import annotations

import builtins
import os

import pytest

import fakeboard as fb
from rknnlab import board
from rknnlab.board import BackendUnavailableError, choose_backend, read_board

NO_ENV: dict = {}


# ------------------------------------------------------------------ an RK3588 board
def test_rk3588_board_is_detected(tmp_path):
    fb.rk3588_board(tmp_path)
    b = read_board(str(tmp_path), machine="aarch64", env=NO_ENV)
    assert b.is_rockchip
    assert b.compatible == ["radxa,rock-5b", "rockchip,rk3588"]
    assert (b.soc, b.soc_variant, b.npu_cores) == ("rk3588", None, 3)
    assert b.model == "Radxa ROCK 5B"
    assert b.npu_driver == "rknpu"
    assert b.npu_device == str(tmp_path / "dev/dri/card1")
    assert b.npu_device_nodes == [str(tmp_path / "dev/dri/card1"), str(tmp_path / "dev/dri/renderD129")]
    assert b.driver_version == "0.9.8"
    assert b.npu_load == "Core0: 12%, Core1: 0%, Core2: 0%"
    assert b.npu_load_percent == [12, 0, 0]
    assert (b.npu_freq_hz, b.npu_max_freq_hz) == (1_000_000_000, 1_000_000_000)
    assert b.npu_freq_source.endswith("devfreq/fdab0000.npu/cur_freq")
    assert b.librknnrt_path == str(tmp_path / "usr/lib/librknnrt.so")
    assert b.librknnrt_version == "2.3.2 (429f97ae6b@2025-04-09T09:09:27)"
    assert b.librknnrt_version_number == "2.3.2"
    assert b.librknnrt_arch == "aarch64"
    assert b.kernel == "6.1.75-rockchip-rk3588"
    assert b.machine == "aarch64"
    assert (b.mem_total_kb, b.cma_total_kb) == (16337380, 65536)
    assert b.rknpu_present
    assert "driver_version" not in b.notes and "npu_device" not in b.notes


def test_dict_is_plain_data(tmp_path):
    fb.rk3588_board(tmp_path)
    d = read_board(str(tmp_path), env=NO_ENV).to_dict()
    assert d["soc"] == "rk3588" and isinstance(d["notes"], dict)


@pytest.mark.parametrize("compatible, soc, variant, cores", [
    ([b"xunlong,orangepi-5", b"rockchip,rk3588s"], "rk3588", "rk3588s", 3),
    ([b"rockchip,rk3588s-orangepi-5", b"rockchip,rk3588"], "rk3588", None, 3),
    ([b"rockchip,rk3588s-orangepi-5"], "rk3588", "rk3588s", 3),
    ([b"radxa,rock-3a", b"rockchip,rk3568"], "rk3568", None, 1),
    ([b"pine64,quartz64-a", b"rockchip,rk3566"], "rk3566", None, 1),
    ([b"rockchip,rk3576-evb1-v10", b"rockchip,rk3576"], "rk3576", None, 2),
    ([b"radxa,rockpi4b", b"rockchip,rk3399"], "rk3399", None, None),
])
def test_soc_from_device_tree(tmp_path, compatible, soc, variant, cores):
    fb.rk3588_board(tmp_path, compatible=compatible)
    b = read_board(str(tmp_path), env=NO_ENV)
    assert (b.soc, b.soc_variant, b.npu_cores) == (soc, variant, cores)
    assert ("soc" in b.notes) == (soc not in board.SOC_NPU_CORES)


def test_device_tree_under_proc_only(tmp_path):
    fb.write(tmp_path, "/proc/device-tree/compatible", b"friendlyarm,nanopi-r6s\x00rockchip,rk3588s\x00")
    fb.write(tmp_path, "/proc/device-tree/model", b"FriendlyElec NanoPi R6S\x00")
    b = read_board(str(tmp_path), env=NO_ENV)
    assert b.is_rockchip and b.soc == "rk3588" and b.model == "FriendlyElec NanoPi R6S"
    # a Rockchip board without the rknpu driver: no device, and we say so
    assert b.npu_device is None and b.npu_driver is None
    assert b.driver_version is None and b.notes["driver_version"] == "missing"


def test_librknnrt_version_across_read_chunks(tmp_path):
    # the marker straddles the 1 MiB read boundary
    data = fb.fake_elf(size=(1 << 20) + 4096, at=(1 << 20) - 7)
    path = fb.write(tmp_path, "/usr/lib/librknnrt.so", data)
    assert board.librknnrt_version(str(path)) == "2.3.2 (429f97ae6b@2025-04-09T09:09:27)"


def test_librknnrt_without_version_string(tmp_path):
    fb.rk3588_board(tmp_path, lib=False)
    fb.write(tmp_path, "/usr/lib/librknnrt.so", fb.fake_elf(payload=b""))
    b = read_board(str(tmp_path), env=NO_ENV)
    assert b.librknnrt_path and b.librknnrt_version is None
    assert "librknnrt_version" in b.notes


def test_librknnrt_search_order_and_env(tmp_path):
    fb.rk3588_board(tmp_path, lib=False)
    assert board.find_librknnrt(str(tmp_path), env=NO_ENV) is None
    fb.write(tmp_path, "/usr/lib/aarch64-linux-gnu/librknnrt.so", fb.fake_elf())
    assert board.find_librknnrt(str(tmp_path), env=NO_ENV).endswith("/usr/lib/aarch64-linux-gnu/librknnrt.so")
    fb.write(tmp_path, "/usr/local/lib/librknnrt.so", fb.fake_elf())
    assert board.find_librknnrt(str(tmp_path), env=NO_ENV).endswith("/usr/local/lib/librknnrt.so")
    fb.write(tmp_path, "/opt/rknn/librknnrt.so", fb.fake_elf(machine=40))
    env = {"LIBRKNNRT_PATH": "/opt/rknn/librknnrt.so"}
    b = read_board(str(tmp_path), env=env)
    assert b.librknnrt_path == str(tmp_path / "opt/rknn/librknnrt.so")
    assert b.librknnrt_arch == "arm (32-bit)"
    # LIBRKNNRT_PATH naming nothing: no fallback to the default places, and a note
    notes: dict = {}
    assert board.find_librknnrt(str(tmp_path), env={"LIBRKNNRT_PATH": "/nope.so"}, notes=notes) is None
    assert "LIBRKNNRT_PATH" in notes["librknnrt"]


def test_librknnrt_env_default_is_os_environ(tmp_path, monkeypatch):
    lib = fb.write(tmp_path, "/elsewhere/librknnrt.so", fb.fake_elf())
    monkeypatch.setenv("LIBRKNNRT_PATH", str(lib))
    assert board.find_librknnrt() == str(lib)


def test_old_kernel_misc_device(tmp_path):
    fb.write(tmp_path, "/proc/device-tree/compatible", b"rockchip,rk3568\x00")
    fb.write(tmp_path, "/dev/rknpu", b"")
    b = read_board(str(tmp_path), env=NO_ENV)
    assert b.npu_device == str(tmp_path / "dev/rknpu") and b.npu_driver == "rknpu"


def test_driver_loaded_but_node_not_in_container(tmp_path):
    fb.write(tmp_path, "/proc/device-tree/compatible", b"rockchip,rk3588\x00")
    fb.drm(tmp_path, "card1", "RKNPU", node=False)
    b = read_board(str(tmp_path), env=NO_ENV)
    assert b.npu_driver == "rknpu" and b.npu_device is None
    assert "does not exist" in b.notes["npu_device"]


def test_uevent_fallback(tmp_path):
    fb.write(tmp_path, "/proc/device-tree/compatible", b"rockchip,rk3588\x00")
    fb.write(tmp_path, "/sys/class/drm/card1/device/uevent", "OF_NAME=npu\nDRIVER=RKNPU\n")
    fb.write(tmp_path, "/dev/dri/card1", b"")
    assert read_board(str(tmp_path), env=NO_ENV).npu_device == str(tmp_path / "dev/dri/card1")


def test_mainline_rocket_driver_is_not_an_rknpu_device(tmp_path):
    fb.write(tmp_path, "/proc/device-tree/compatible", b"rockchip,rk3588\x00")
    fb.link(tmp_path, "/sys/class/accel/accel0/device/driver", "../../../bus/platform/drivers/rocket")
    fb.write(tmp_path, "/dev/accel/accel0", b"")
    b = read_board(str(tmp_path), env=NO_ENV)
    assert b.npu_driver == "rocket" and b.npu_device is None
    assert "rocket" in b.notes["npu_device"]


# ------------------------------------------------------------------ a PC
def test_pc_is_not_a_board(tmp_path):
    fb.pc(tmp_path)
    b = read_board(str(tmp_path), machine="x86_64", env=NO_ENV)
    assert not b.is_rockchip
    assert b.soc is None and b.compatible == []
    assert b.model == "LENOVO ThinkPad T14"
    assert b.npu_device is None and b.npu_device_nodes == [] and b.npu_driver is None
    assert b.driver_version is None and b.npu_load is None and b.npu_freq_hz is None
    assert b.librknnrt_path is None
    assert b.kernel == "6.1.0-18-amd64" and b.mem_total_kb == 32768000
    assert b.notes["npu_device"] == "missing"


def test_empty_root_never_raises(tmp_path):
    b = read_board(str(tmp_path), env=NO_ENV)
    assert not b.is_rockchip and b.model is None and b.mem_total_kb is None
    assert b.machine and b.kernel  # from this machine's uname


def test_this_machine_reads_without_error():
    b = read_board()
    assert isinstance(b.notes, dict) and b.machine


# ------------------------------------------------------------------ unreadable files
def _deny(monkeypatch, fragment):
    """Make open() raise PermissionError under paths containing ``fragment``, as
    reading debugfs does for a normal user (chmod 000 does not stop root)."""
    real_open = builtins.open

    def fake_open(file, *args, **kwargs):
        if fragment in os.fspath(file):
            raise PermissionError(13, "Permission denied", os.fspath(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", fake_open)


def test_debugfs_needs_root(tmp_path, monkeypatch):
    fb.rk3588_board(tmp_path)
    _deny(monkeypatch, "/sys/kernel/debug/")
    b = read_board(str(tmp_path), env=NO_ENV)
    assert b.driver_version is None
    assert b.notes["driver_version"].startswith("needs root")
    assert b.npu_load is None and b.notes["npu_load"].startswith("needs root")
    assert b.npu_freq_hz == 1_000_000_000  # devfreq is world-readable
    assert b.npu_device is not None  # the rest still works


def test_procfs_is_used_when_debugfs_is_closed(tmp_path, monkeypatch):
    fb.rk3588_board(tmp_path)
    fb.write(tmp_path, "/proc/rknpu/load", "NPU load:  Core0:  3%, Core1:  4%, Core2:  5%,\n")
    fb.write(tmp_path, "/proc/rknpu/version", "RKNPU driver: v0.9.6\n")
    _deny(monkeypatch, "/sys/kernel/debug/")
    b = read_board(str(tmp_path), env=NO_ENV)
    assert b.driver_version == "0.9.6" and b.npu_load_percent == [3, 4, 5]


def test_everything_unreadable_never_raises(tmp_path, monkeypatch):
    fb.rk3588_board(tmp_path)
    _deny(monkeypatch, str(tmp_path))
    b = read_board(str(tmp_path), env=NO_ENV)
    assert not b.is_rockchip and b.compatible == []
    assert b.notes["compatible"] == "needs root"
    assert b.librknnrt_version is None


def test_files_that_are_directories(tmp_path):
    fb.write(tmp_path, "/proc/device-tree/compatible", b"rockchip,rk3588\x00")
    fb.drm(tmp_path, "card1", "RKNPU")
    for f in ("version", "load", "freq"):
        (tmp_path / "sys/kernel/debug/rknpu" / f).mkdir(parents=True)
    (tmp_path / "sys/class/devfreq/fdab0000.npu/cur_freq").mkdir(parents=True)
    (tmp_path / "proc/meminfo").mkdir(parents=True)
    b = read_board(str(tmp_path), env=NO_ENV)
    assert b.npu_device is not None
    assert b.driver_version is None and b.notes["driver_version"].startswith("unreadable")
    assert b.npu_load is None and b.npu_freq_hz is None and b.mem_total_kb is None


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads chmod 000 files")
def test_chmod_000_as_normal_user(tmp_path):
    fb.rk3588_board(tmp_path)
    f = tmp_path / "sys/kernel/debug/rknpu/version"
    f.chmod(0)
    try:
        b = read_board(str(tmp_path), env=NO_ENV)
        assert b.notes["driver_version"].startswith("needs root")
    finally:
        f.chmod(0o644)


# ------------------------------------------------------------------ choose_backend
def _board(tmp_path, lib=True, npu=True):
    fb.rk3588_board(tmp_path, lib=lib)
    if not npu:
        for n in ("card1", "renderD129"):
            (tmp_path / "dev/dri" / n).unlink()
    return read_board(str(tmp_path), env=NO_ENV)


def test_auto_picks_native_on_a_full_board(tmp_path):
    name, reason = choose_backend("auto", _board(tmp_path), env=NO_ENV)
    assert name == "native"
    assert "librknnrt.so 2.3.2" in reason and "card1" in reason


def test_auto_picks_sim_on_a_pc(tmp_path):
    fb.pc(tmp_path)
    name, reason = choose_backend("auto", read_board(str(tmp_path), env=NO_ENV), env=NO_ENV)
    assert name == "sim"
    assert "not a Rockchip board" in reason and "librknnrt.so" in reason


@pytest.mark.parametrize("lib, npu, missing", [
    (False, True, "librknnrt.so"),
    (True, False, "RKNPU device node"),
])
def test_auto_needs_both_library_and_device(tmp_path, lib, npu, missing):
    b = _board(tmp_path, lib=lib, npu=npu)
    name, reason = choose_backend("auto", b, env=NO_ENV)
    assert name == "sim" and missing in reason
    with pytest.raises(BackendUnavailableError) as e:
        choose_backend("native", b, env=NO_ENV)
    assert missing in str(e.value) and "RKNNLAB_BACKEND=sim" in str(e.value)


def test_native_on_a_pc_says_what_is_missing(tmp_path):
    fb.pc(tmp_path)
    with pytest.raises(BackendUnavailableError) as e:
        choose_backend("native", read_board(str(tmp_path), env=NO_ENV), env=NO_ENV)
    msg = str(e.value)
    assert "librknnrt.so" in msg and "RKNPU device node" in msg and "not a Rockchip board" in msg


def test_explicit_choices(tmp_path):
    b = _board(tmp_path)
    assert choose_backend("sim", b, env=NO_ENV)[0] == "sim"
    assert choose_backend("native", b, env=NO_ENV)[0] == "native"
    assert choose_backend("NATIVE", b, env=NO_ENV)[0] == "native"
    with pytest.raises(ValueError):
        choose_backend("gpu", b, env=NO_ENV)


def test_env_overrides_auto_only(tmp_path, monkeypatch):
    b = _board(tmp_path)
    name, reason = choose_backend("auto", b, env={"RKNNLAB_BACKEND": "sim"})
    assert name == "sim" and "RKNNLAB_BACKEND=sim" in reason
    # an explicit request wins over the environment
    assert choose_backend("native", b, env={"RKNNLAB_BACKEND": "sim"})[0] == "native"
    # the default env is os.environ
    monkeypatch.setenv("RKNNLAB_BACKEND", "sim")
    assert choose_backend("auto", b)[0] == "sim"
    monkeypatch.setenv("RKNNLAB_BACKEND", "auto")
    assert choose_backend("auto", b)[0] == "native"
    monkeypatch.setenv("RKNNLAB_BACKEND", "bogus")
    with pytest.raises(ValueError, match="RKNNLAB_BACKEND"):
        choose_backend("auto", b)


def test_env_forcing_native_where_impossible(tmp_path):
    b = _board(tmp_path, lib=False)
    with pytest.raises(BackendUnavailableError, match="RKNNLAB_BACKEND=native"):
        choose_backend("auto", b, env={"RKNNLAB_BACKEND": "native"})


def test_source_label_names_the_simulator_or_the_board(tmp_path):
    assert board.source_label("sim", "rk3576") == "simulated RK3576 — rknnlab sim"
    root = fb.rk3588_board(tmp_path)
    label = board.source_label("native", "rk3588", read_board(str(root)))
    assert "RK3588" in label and "sim" not in label
    assert read_board(str(root)).model in label
