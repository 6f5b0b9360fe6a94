"""The progress bar of rknnlab.run: where it goes, what it counts, what it leaves behind."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest

from rknnlab.experiment import progress

LIB = str(Path(__file__).resolve().parents[1] / "lib")


# --------------------------------------------------------------------------- where it goes
class _Shell:
    def __init__(self, allow_stdin):
        self.kernel = types.SimpleNamespace(_allow_stdin=allow_stdin)


def _fake_ipython(monkeypatch, allow_stdin):
    """An IPython whose get_ipython() is a kernel's shell, as in a Jupyter kernel."""
    module = types.ModuleType("IPython")
    module.get_ipython = lambda: _Shell(allow_stdin)
    monkeypatch.setitem(sys.modules, "IPython", module)


def test_outside_a_kernel_the_bar_follows_stderr(monkeypatch):
    monkeypatch.delenv(progress.ENV_PROGRESS, raising=False)
    monkeypatch.setitem(sys.modules, "IPython", None)
    monkeypatch.setattr(sys, "stderr", open(os.devnull, "w"))  # a file: no bar
    assert progress.choose(None) is None
    assert progress.choose(True) == "text"
    assert progress.choose(False) is None
    monkeypatch.setenv(progress.ENV_PROGRESS, "1")
    assert progress.choose(None) == "text"


def test_a_kernel_with_a_person_gets_a_widget_an_unattended_one_nothing(monkeypatch):
    monkeypatch.delenv(progress.ENV_PROGRESS, raising=False)
    _fake_ipython(monkeypatch, allow_stdin=True)     # JupyterLab: input() can be answered
    assert progress.choose(None) == "notebook"
    monkeypatch.setenv(progress.ENV_PROGRESS, "off")
    assert progress.choose(None) is None
    monkeypatch.delenv(progress.ENV_PROGRESS)
    assert progress.choose(None, follows_itself=True) is None  # e.g. widgets.RunnerPanel
    _fake_ipython(monkeypatch, allow_stdin=False)    # nbclient, papermill, the book build
    assert progress.choose(None) is None
    assert progress.choose(True) == "notebook"       # asked for: given


# --------------------------------------------------------------------------- what it counts
pytest.importorskip("pandas", reason="results need pandas (the lab extra)")
pytest.importorskip("onnxruntime", reason="the simulator needs onnxruntime (the sim extra)")


def slow_loop(lab):
    import time as _t
    for i in lab.loop():
        _t.sleep(0.015)


def stops_at_5(lab):
    for i in lab.loop():
        if i == 5:
            raise RuntimeError("stopped on purpose")


def test_the_bar_counts_iterations_across_variants_as_they_run(capsys):
    import rknnlab
    r = rknnlab.run([slow_loop, stops_at_5], model="digits_cnn", iterations=98, warmup=2,
                    backend="sim", sample_hz=0, progress=True)
    assert r["slow_loop"].ok and r["stops_at_5"].status == "error"
    err = capsys.readouterr().err
    counts = [int(n) for n in re.findall(r"(\d+)/200 \[", err)]
    # read from the child while it ran (100 iterations of 15 ms; the bar shows after 1 s) ...
    assert any(0 < n < 100 for n in counts), err[-2000:]
    # ... and the variant that stopped early still fills its share
    assert counts[-1] == 200 and "stops_at_5 (2/2)" in err


def test_a_run_shorter_than_a_second_shows_no_bar(capsys):
    import rknnlab
    rknnlab.run(stops_at_5, model="digits_cnn", iterations=5, warmup=0, backend="sim",
                sample_hz=0, progress=True)
    assert "rknnlab.run" not in capsys.readouterr().err


def test_quiet_means_no_bar(capsys):
    import rknnlab
    rknnlab.run(slow_loop, model="digits_cnn", iterations=5, warmup=0, backend="sim",
                sample_hz=0, progress=False)
    assert "rknnlab.run" not in capsys.readouterr().err


def test_a_lab_checks_run_shows_no_bar(monkeypatch):
    """A check prints its own verdict: its recorded run asks for no bar, even in a kernel
    a person drives with bars forced on (where rknnlab.run would otherwise show one)."""
    from rknnlab.checks import _core
    from rknnlab.experiment import runner, variants
    _fake_ipython(monkeypatch, allow_stdin=True)
    monkeypatch.setenv(progress.ENV_PROGRESS, "1")
    modes = []

    class Spy(progress.RunProgress):
        def __init__(self, mode, *args):
            modes.append(mode)
            super().__init__(None, *args)

    monkeypatch.setattr(runner, "RunProgress", Spy)
    assert progress.choose(None) == "notebook"  # what a run without progress=False would get
    res, run, records = _core._recorded_run(variants.prealloc_output, "digits_cnn", "rk3588",
                                            iterations=5)
    assert run.ok, run.error
    assert modes == [None]


# --------------------------------------------------------------------------- the command line
def _cli_in_a_terminal(*args):
    """Run the CLI with stderr on a pseudo-terminal; return (code, what stderr showed)."""
    import fcntl
    import pty
    import struct
    import termios
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # 100 columns
    env = dict(os.environ, PYTHONPATH=LIB + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop(progress.ENV_PROGRESS, None)
    p = subprocess.Popen([sys.executable, "-m", "rknnlab", *args], stdout=subprocess.PIPE,
                         stderr=slave, env=env)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    p.wait(timeout=120)
    os.close(master)
    return p.returncode, b"".join(chunks).decode("utf-8", "replace")


@pytest.mark.timeout(240)
def test_cli_bar_on_a_terminal_and_not_with_quiet():
    # long enough to outlast the bar's delay: digits_cnn runs in ~0.1 ms per iteration here
    args = ("run", "-v", "prealloc_output", "-m", "mobilenet_v2", "-n", "1500", "--warmup", "2",
            "--backend", "sim")
    code, err = _cli_in_a_terminal(*args)
    assert code == 0 and "rknnlab.run" in err and "1502/1502" in err, err[-1000:]
    code, err = _cli_in_a_terminal(*args, "--quiet")
    assert code == 0 and "rknnlab.run" not in err, err[-1000:]


# --------------------------------------------------------------------------- notebooks
@pytest.mark.timeout(240)
def test_an_executed_notebook_keeps_no_bar(tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(
        "import rknnlab\n"
        "r = rknnlab.run('prealloc_output', model='digits_cnn', iterations=20, backend='sim')\n"
        "print(r['prealloc_output'].status)")]
    env_before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = LIB + (os.pathsep + env_before if env_before else "")
    try:
        client = nbclient.NotebookClient(nb, timeout=180, kernel_name="python3",
                                         resources={"metadata": {"path": str(tmp_path)}})
        t = time.perf_counter()
        client.execute()
    finally:
        if env_before is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = env_before
    outputs = nb.cells[0].outputs
    assert [o.get("text") for o in outputs] == ["ok\n"], outputs   # no bar, no stderr
    assert "widgets" not in nb.metadata
    assert time.perf_counter() - t < 180
