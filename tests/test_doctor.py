"""rknnlab.doctor and `python -m rknnlab doctor`: the report on a PC, on a board, with
things missing, and the command line."""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import fakeboard as fb
from rknnlab import cli, doctor
from rknnlab.board import BoardInfo, read_board

LIB = str(Path(__file__).resolve().parents[1] / "lib")
NO_ENV: dict = {}


def _rows(rows, section=None, item=None):
    return [r for r in rows if (section is None or r.section == section) and (item is None or r.item == item)]


def _one(rows, item):
    found = _rows(rows, item=item)
    assert len(found) == 1, (item, found)
    return found[0]


@pytest.fixture
def models(tmp_path, monkeypatch):
    """A fake data dir: mobilenet for rk3588 + rk3576, a second model for rk3576 only."""
    data = tmp_path / "data"
    for rel in ("mobilenet_v2/model.onnx", "mobilenet_v2/rk3588.rknn", "mobilenet_v2/rk3588.report.json",
                "mobilenet_v2/rk3576.rknn", "mobilenet_v2/rk3576.report.json",
                "other/model.onnx", "other/rk3576.rknn"):
        fb.write(data, "models/" + rel, b"x")
    (data / "models" / "empty").mkdir()
    monkeypatch.setenv("RKNNLAB_DATA", str(data))
    return data


def _check_invariants(rows):
    assert rows, "no rows"
    for r in rows:
        assert r.status in ("ok", "warn", "missing"), r
        assert r.section and r.item and isinstance(r.value, str), r
        if r.status != "ok":
            assert r.advice, f"no advice for a {r.status} row: {r}"


def test_report_on_a_pc(tmp_path, models):
    b = read_board(str(fb.pc(tmp_path / "root")), machine="x86_64", env=NO_ENV)
    rows = doctor.doctor_report(board=b, env=NO_ENV)
    _check_invariants(rows)
    assert [s for s in dict.fromkeys(r.section for r in rows)] == \
        ["board", "npu", "runtime", "python", "backend", "models"]
    first = _one(rows, "Rockchip board")
    assert first.value.startswith("no") and "simulator" in first.advice and "fine" in first.advice
    assert _one(rows, "NPU device").status == "missing"
    lib = _one(rows, "librknnrt.so")
    assert lib.status == "missing" and "simulator" in lib.advice
    assert "ARM only" in _one(rows, "rknn-toolkit-lite2").advice
    backend = _one(rows, "auto picks")
    assert backend.status == "ok" and backend.value.startswith("sim: ")
    assert _one(rows, "numpy").status == "ok"
    assert _one(rows, "Python").value.startswith("%d.%d." % sys.version_info[:2])
    # models from the directory listing only (these fake files name no toolkit)
    assert _one(rows, "mobilenet_v2").value == "rk3576, rk3588; ONNX twin; toolkit version not recorded"
    assert _one(rows, "other").value == "rk3576 (rknn only); ONNX twin; toolkit version not recorded"
    assert not _rows(rows, item="empty")


def test_report_on_an_rk3588_board(tmp_path, models):
    b = read_board(str(fb.rk3588_board(tmp_path / "root")), machine="aarch64", env=NO_ENV)
    rows = doctor.doctor_report(board=b, env=NO_ENV)
    _check_invariants(rows)
    assert _one(rows, "Rockchip board").value == "yes"
    assert _one(rows, "model").value == "Radxa ROCK 5B"
    assert _one(rows, "SoC").value == "rk3588, 3 NPU cores"
    npu = _one(rows, "NPU device")
    assert npu.status == "ok" and npu.value.endswith("/dev/dri/card1 (also %s), driver rknpu"
                                                     % (tmp_path / "root/dev/dri/renderD129"))
    assert _one(rows, "rknpu driver").value == "0.9.8"
    assert _one(rows, "NPU load").value == "Core0: 12%, Core1: 0%, Core2: 0%"
    assert _one(rows, "NPU frequency").value == "1000 MHz (max 1000 MHz)"
    assert _one(rows, "librknnrt version").value.startswith("2.3.2")
    lite = _one(rows, "rknn-toolkit-lite2")
    if lite.status != "ok":  # installed only on a real board
        assert "pip install rknn-toolkit-lite2" in lite.advice
    assert _one(rows, "auto picks").value.startswith("native: librknnrt.so 2.3.2")
    # native on rk3588: a model without rk3588.rknn is flagged
    assert _one(rows, "mobilenet_v2").status == "ok"
    other = _one(rows, "other")
    assert other.status == "warn" and "rk3588.rknn" in other.advice


def test_board_with_things_missing(tmp_path, models, monkeypatch):
    root = fb.rk3588_board(tmp_path / "root", lib=False)
    fb.write(root, "/usr/lib/librknnrt.so", fb.fake_elf(machine=40,
                                                        payload=b"librknnrt version: 1.6.0 (x)"))
    real_open = open

    def deny_debugfs(file, *a, **k):
        if "/sys/kernel/debug/" in os.fspath(file):
            raise PermissionError(13, "Permission denied")
        return real_open(file, *a, **k)

    monkeypatch.setattr("builtins.open", deny_debugfs)
    b = read_board(str(root), machine="aarch64", env=NO_ENV)
    monkeypatch.setattr("builtins.open", real_open)
    rows = doctor.doctor_report(board=b, env=NO_ENV)
    _check_invariants(rows)
    drv = _one(rows, "rknpu driver")
    assert (drv.value, drv.status) == ("needs root", "warn") and "sudo" in drv.advice
    assert _one(rows, "NPU load").status == "warn"
    assert _one(rows, "NPU frequency").status == "ok"
    ver = _one(rows, "librknnrt version")
    assert ver.status == "warn" and "2.3.x" in ver.advice
    arch = _one(rows, "librknnrt arch")
    assert arch.status == "warn" and "aarch64" in arch.advice


def test_board_without_runtime(tmp_path, models):
    b = read_board(str(fb.rk3588_board(tmp_path / "root", lib=False)), machine="aarch64", env=NO_ENV)
    rows = doctor.doctor_report(board=b, env=NO_ENV)
    _check_invariants(rows)
    lib = _one(rows, "librknnrt.so")
    assert lib.status == "missing"
    assert "/usr/lib" in lib.advice and "rknpu2/runtime/Linux/librknn_api/aarch64" in lib.advice
    backend = _one(rows, "auto picks")
    assert backend.value.startswith("sim: no librknnrt.so") and "fix what is missing" in backend.advice


def test_device_the_user_cannot_open(models):
    b = BoardInfo(is_rockchip=True, soc="rk3588", npu_cores=3, npu_device="/dev/dri/card1",
                  npu_device_nodes=["/dev/dri/card1"], npu_device_access=False, npu_driver="rknpu",
                  machine="aarch64", kernel="6.1")
    row = _one(doctor.doctor_report(board=b, env=NO_ENV), "NPU device")
    assert row.status == "warn" and "usermod" in row.advice


def test_backend_env_is_reported(tmp_path, models):
    b = read_board(str(fb.pc(tmp_path / "root")), env=NO_ENV)
    row = _one(doctor.doctor_report(board=b, env={"RKNNLAB_BACKEND": "sim"}), "auto picks")
    assert row.value.startswith("sim:") and "RKNNLAB_BACKEND=sim" in row.advice
    row = _one(doctor.doctor_report(board=b, env={"RKNNLAB_BACKEND": "native"}), "auto picks")
    assert row.status == "warn" and "librknnrt.so" in row.advice


def test_models_not_found(tmp_path, monkeypatch):
    monkeypatch.setenv("RKNNLAB_DATA", str(tmp_path / "nowhere"))
    b = read_board(str(fb.pc(tmp_path / "root")), env=NO_ENV)
    row = _one(doctor.doctor_report(board=b, env=NO_ENV), "data/models")
    assert row.status == "missing" and "RKNNLAB_DATA" in row.advice


def test_print_doctor_is_aligned_text(tmp_path, models):
    b = read_board(str(fb.pc(tmp_path / "root")), machine="x86_64", env=NO_ENV)
    rows = doctor.doctor_report(board=b, env=NO_ENV)
    buf = io.StringIO()
    assert doctor.print_doctor(file=buf, rows=rows) is rows
    text = buf.getvalue()
    lines = text.splitlines()
    assert lines[0].startswith("rknnlab doctor")
    assert "[backend]" in lines
    backend = [ln for ln in lines if "auto picks" in ln]
    assert len(backend) == 1 and "sim:" in backend[0]
    # the value column starts at the same place on every row line
    heads = [ln for ln in lines if ln[:2] == "  " and ln[2:3].strip()]
    cols = {ln.index(r.value[:10]) for ln, r in zip(heads, rows)}
    assert len(cols) == 1, cols
    # wrapped at 100 columns; only one unbreakable word (a long path) may stick out
    assert all(len(ln.split()[-1]) > len(ln) - 100 for ln in lines if len(ln) > 100)


def test_cli_main_in_process(capsys):
    assert cli.main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "auto picks" in out
    assert cli.main([]) == 2
    with pytest.raises(SystemExit) as e:
        cli.main(["--version"])
    assert e.value.code == 0


def _env():
    env = {k: v for k, v in os.environ.items() if k not in ("RKNNLAB_BACKEND",)}
    env["PYTHONPATH"] = LIB + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def test_python_m_rknnlab_doctor():
    p = subprocess.run([sys.executable, "-m", "rknnlab", "doctor"], capture_output=True, text=True,
                       env=_env(), timeout=120)
    assert p.returncode == 0, p.stderr
    line = [ln for ln in p.stdout.splitlines() if "auto picks" in ln]
    assert len(line) == 1, p.stdout
    assert "sim:" in line[0] or "native:" in line[0]
    assert "[board]" in p.stdout and "[models]" in p.stdout


def test_python_m_rknnlab_doctor_json():
    p = subprocess.run([sys.executable, "-m", "rknnlab", "doctor", "--json"], capture_output=True,
                       text=True, env=_env(), timeout=120)
    assert p.returncode == 0, p.stderr
    rows = json.loads(p.stdout)
    assert {"section", "item", "value", "status", "advice"} == set(rows[0])
    assert any(r["item"] == "auto picks" for r in rows)


def test_memory_sampler_row(tmp_path, models, monkeypatch):
    from rknnlab import probe
    b = read_board(str(fb.pc(tmp_path / "root")), machine="x86_64", env=NO_ENV)
    row = _one(doctor.doctor_report(board=b, env=NO_ENV), "memory sampler")
    assert row.section == "python" and row.status == "ok" and row.value.startswith("C (")
    assert row.value.endswith(".so)")
    forced = _one(doctor.doctor_report(board=b, env={"RKNNLAB_SAMPLER": "python"}), "memory sampler")
    assert forced.value.startswith("Python (") and "RKNNLAB_SAMPLER" in forced.advice
    # no working compiler, nothing cached: the Python sampler, and how to get the C one
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("CC", "/bin/false")
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    monkeypatch.setattr(probe.tempfile, "tempdir", None)
    monkeypatch.setattr(probe, "_loaded", {})
    rows = doctor.doctor_report(board=b, env=NO_ENV)
    _check_invariants(rows)
    row = _one(rows, "memory sampler")
    assert row.status == "warn" and "did not build" in row.value and "apt install gcc" in row.advice


@pytest.fixture
def versioned_models(tmp_path, monkeypatch):
    """Models whose files name their toolkit: 'course' by 2.3.2 (rk3588 and rk3568),
    'newer' by 2.5.0 (rk3588), 'reported' whose .rknn names none but whose report does."""
    data = tmp_path / "data"
    fb.write(data, "models/course/rk3588.rknn", fb.fake_rknn("2.3.2"))
    fb.write(data, "models/course/rk3568.rknn", fb.fake_rknn("2.3.2"))
    fb.write(data, "models/newer/rk3588.rknn", fb.fake_rknn("2.5.0"))
    fb.write(data, "models/reported/rk3588.rknn", b"RKNN" + bytes(64))
    fb.write(data, "models/reported/rk3588.report.json", json.dumps({"toolkit_version": "2.5.0"}))
    monkeypatch.setenv("RKNNLAB_DATA", str(data))
    return data


def _board_with_runtime(tmp_path, version):
    root = fb.rk3588_board(tmp_path / "root", lib=False)
    payload = fb.runtime_version(version) if version else b""
    fb.write(root, "/usr/lib/librknnrt.so", fb.fake_elf(payload=payload))
    return read_board(str(root), machine="aarch64", env=NO_ENV)


def test_models_with_a_runtime_older_than_their_toolkit(tmp_path, versioned_models):
    rows = doctor.doctor_report(board=_board_with_runtime(tmp_path, "2.3.0"), env=NO_ENV)
    _check_invariants(rows)
    for name, toolkit in (("course", "2.3.2"), ("newer", "2.5.0"), ("reported", "2.5.0")):
        row = _one(rows, name)
        assert row.section == "models" and row.status == "warn", row
        assert f"rknn-toolkit2 {toolkit} (newer than librknnrt 2.3.0)" in row.value
        assert f"upgrade librknnrt.so to {toolkit} or newer" in row.advice
        assert "rknn-toolkit2 2.3.0 or older" in row.advice
    # the whole advice once, for the newest toolkit
    summary = _one(rows, "toolkit vs runtime")
    assert summary.section == "models" and summary.status == "warn"
    assert "rknn-toolkit2 2.5.0, newer than librknnrt 2.3.0" in summary.value
    assert "upgrade librknnrt.so to 2.5.0 or newer" in summary.advice
    assert "rknn-toolkit2<=2.3.0" in summary.advice and "airockchip/rknn-toolkit2" in summary.advice
    text = doctor.format_doctor(rows)
    assert "newer than librknnrt 2.3.0" in text and "-> upgrade librknnrt.so" in text


def test_models_with_the_runtime_of_their_toolkit(tmp_path, versioned_models):
    rows = doctor.doctor_report(board=_board_with_runtime(tmp_path, "2.3.2"), env=NO_ENV)
    _check_invariants(rows)
    course = _one(rows, "course")
    # on the board only the file it would load (rk3588) counts
    assert course.status == "ok" and course.value.endswith("; rknn-toolkit2 2.3.2 (librknnrt 2.3.2: ok)")
    for name in ("newer", "reported"):
        row = _one(rows, name)
        assert row.status == "warn" and "newer than librknnrt 2.3.2" in row.value
        assert "upgrade librknnrt.so to 2.5.0 or newer" in row.advice
    assert "rknn-toolkit2<=2.3.2" in _one(rows, "toolkit vs runtime").advice


def test_models_with_a_runtime_newer_than_their_toolkit(tmp_path, versioned_models):
    rows = doctor.doctor_report(board=_board_with_runtime(tmp_path, "2.5.0"), env=NO_ENV)
    _check_invariants(rows)
    for name, toolkit in (("course", "2.3.2"), ("newer", "2.5.0"), ("reported", "2.5.0")):
        row = _one(rows, name)
        assert row.status == "ok" and not row.advice, row
        assert row.value.endswith(f"; rknn-toolkit2 {toolkit} (librknnrt 2.5.0: ok)")
    assert not _rows(rows, item="toolkit vs runtime")


def test_models_with_an_unreadable_runtime_version(tmp_path, versioned_models):
    b = _board_with_runtime(tmp_path, None)
    assert b.librknnrt_path and not b.librknnrt_version
    rows = doctor.doctor_report(board=b, env=NO_ENV)
    _check_invariants(rows)
    assert all("librknnrt" not in r.value for r in _rows(rows, section="models") if r.item != "toolkit vs runtime")
    row = _one(rows, "toolkit vs runtime")
    assert row.section == "models" and row.status == "warn"
    assert "2.5.0" in row.value and "unreadable" in row.value   # the newest toolkit among the models
    assert f"strings {b.librknnrt_path}" in row.advice and "2.5.0 or newer" in row.advice


def test_models_on_a_pc_say_nothing_alarming(tmp_path, versioned_models):
    rows = doctor.doctor_report(board=read_board(str(fb.pc(tmp_path / "root")), machine="x86_64", env=NO_ENV),
                                env=NO_ENV)
    _check_invariants(rows)
    models_rows = _rows(rows, section="models")
    assert all(r.status == "ok" and not r.advice for r in models_rows), models_rows
    assert _one(rows, "course").value == "rk3568 (rknn only), rk3588 (rknn only); no ONNX twin; rknn-toolkit2 2.3.2"
    assert not any("librknnrt" in r.value or "newer" in r.value for r in models_rows)


def test_the_shipped_models_on_boards(tmp_path, monkeypatch):
    """The real data/models: a 2.3.2 runtime is enough for every course model, an older one is not."""
    monkeypatch.delenv("RKNNLAB_DATA", raising=False)
    from rknnlab import models
    shipped = models.list_models()
    ok = doctor.doctor_report(board=_board_with_runtime(tmp_path / "a", "2.3.2"), env=NO_ENV)
    assert all(_one(ok, name).status == "ok" and "(librknnrt 2.3.2: ok)" in _one(ok, name).value
               for name in shipped)
    assert not _rows(ok, item="toolkit vs runtime")
    old = doctor.doctor_report(board=_board_with_runtime(tmp_path / "b", "2.2.0"), env=NO_ENV)
    assert all(_one(old, name).status == "warn" for name in shipped)


def test_c_programs_row_names_what_programs_link_with(tmp_path, models, monkeypatch):
    """On a PC the simulator's librknnrt.so (it needs a compiler and a shared libpython)."""
    import sysconfig

    from rknnlab import probe
    b = read_board(str(fb.pc(tmp_path / "root")), machine="x86_64", env=NO_ENV)
    row = _one(doctor.doctor_report(board=b, env=NO_ENV), "C programs")
    assert row.status == doctor.OK and "simulator's librknnrt.so" in row.value
    real = sysconfig.get_config_var
    monkeypatch.setattr(sysconfig, "get_config_var",
                        lambda name: 0 if name == "Py_ENABLE_SHARED" else real(name))
    row = _one(doctor.doctor_report(board=b, env=NO_ENV), "C programs")
    assert row.status == doctor.WARN and "--enable-shared" in row.advice
    monkeypatch.setattr(probe, "_compiler", lambda: None)
    row = _one(doctor.doctor_report(board=b, env=NO_ENV), "C programs")
    assert row.status == doctor.WARN and "gcc" in row.advice
