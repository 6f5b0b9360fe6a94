"""python -m rknnlab run / show."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


LIB = str(Path(__file__).resolve().parents[1] / "lib")

for _mod in ("pandas", "matplotlib", "onnxruntime"):
    pytest.importorskip(_mod, reason="run/show need the lab and sim extras")


def _cli(*args, cwd=None):
    env = dict(os.environ, PYTHONPATH=LIB + os.pathsep + os.environ.get("PYTHONPATH", ""),
               MPLBACKEND="Agg")
    return subprocess.run([sys.executable, "-m", "rknnlab", *args], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=180)


def test_run_then_show(tmp_path):
    trace = tmp_path / "trace.json"
    p = _cli("run", "--variant", "prealloc_output", "--variant", "leak_no_release", "--model",
             "mobilenet_v2", "--iterations", "20", "--warmup", "2", "--backend", "sim",
             "--out", str(trace))
    assert p.returncode == 0, p.stderr
    assert "prealloc_output" in p.stdout and "leak_no_release" in p.stdout
    assert "simulated RK3588" in p.stdout and "trace written to" in p.stdout
    data = json.loads(trace.read_text())
    assert [v["name"] for v in data["variants"]] == ["prealloc_output", "leak_no_release"]
    assert data["meta"]["parameters"]["iterations"] == 20

    png = tmp_path / "png"
    p = _cli("show", str(trace), "--png", str(png))
    assert p.returncode == 0, p.stderr
    assert "mobilenet_v2 (rk3588)" in p.stdout and "iter_median_ms" in p.stdout
    assert sorted(f.name for f in png.iterdir()) == ["iteration_times.png", "memory_memfree.png",
                                                     "memory_rss.png", "phases.png"]
    assert all(f.stat().st_size > 5000 for f in png.iterdir())


def test_clear_errors(tmp_path):
    p = _cli("run", "--variant", "nope", "--backend", "sim")
    assert p.returncode == 2 and "no built-in variant named 'nope'" in p.stderr
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": "rknnlab.trace", "schema_version": 9}')
    p = _cli("show", str(bad))
    assert p.returncode == 2 and "newer rknnlab" in p.stderr
    p = _cli("run", "--variant", "list")
    assert p.returncode == 0 and "want_float_vs_int8" in p.stdout
