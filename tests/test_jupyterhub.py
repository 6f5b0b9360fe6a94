"""The class server (deploy/jupyterhub/jupyterhub_config.py) with two students.

Starts JupyterHub from the course's configuration on 127.0.0.1, overriding on the command
line only what a test must: a test authenticator with a shared password instead of PAM,
SimpleLocalProcessSpawner instead of LocalProcessSpawner (the same process spawner without
switching to a Unix account; the homes are under tmp_path), free ports, and the hub's
database, cookie secret and pid files in tmp_path. The allow list comes from the
configuration's own RKNNLAB_HUB_USERS, 127.0.0.1 from RKNNLAB_HUB_IP (without TLS the
configuration starts only there), and the students' copies come from a student edition of
the course made in tmp_path (RKNNLAB_HUB_COURSE), as on a class server. Two students log in through the login form, start
their servers (each makes its personal copy of the course on first login), and execute
chapter 1 at the same moment, each in a kernel of their own server, through the Jupyter
server's REST and websocket kernel API. Then the servers and the hub are stopped, and no
process the hub started may be left.

The configuration refuses to start without TLS on an address other than 127.0.0.1 (students
type their password there): checked by executing it with a stand-in get_config, and once
through jupyterhub itself.

The client (the hub, a student in a browser, the kernel channel) is
benchmarks/bench_class.py's, which measures how many students the server takes.

Needs the classroom extra (jupyterhub; skipped without it, as in CI's Python 3.9 run) and
configurable-http-proxy (npm install -g configurable-http-proxy). Without the proxy the test
skips, saying so, except in CI (CI=true), where it fails instead.
"""
from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: the fastest chapter on the simulator (chapters/0*.ipynb alone with nbclient on a 2-core
#: machine: 01 7 s, 05 8 s, 03 16 s, 07 22 s, 00 23 s, 04 31 s, 02 45 s, 06 47 s)
CHAPTER = "chapters/01_memory_layers.ipynb"
STUDENTS = ("ann", "bob")

pytestmark = pytest.mark.timeout(150)
# the classroom extra (in dev); CI's Python 3.9 run installs the lab extra only
pytest.importorskip("jupyterhub", reason="jupyterhub is in the classroom extra: pip install -e '.[dev]'")


def _bench():
    path = ROOT / "benchmarks" / "bench_class.py"
    spec = importlib.util.spec_from_file_location("bench_class", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


bc = _bench()


@pytest.fixture
def hub(tmp_path):
    if bc.proxy_command() is None:
        msg = ("the JupyterHub test needs JupyterHub's proxy, configurable-http-proxy "
               "(npm install -g configurable-http-proxy)")
        if os.environ.get("CI") == "true":
            pytest.fail(f"{msg} (CI=true: this test must run in CI, .ci/run installs it)")
        pytest.skip(msg)
    # the student edition of the course, as root makes it on a class server
    course = tmp_path / "class"
    subprocess.run([sys.executable, "-m", "rknnlab", "workspace", "--quiet", "--dir", str(course)],
                   check=True, cwd=tmp_path, capture_output=True, timeout=60)
    hub = bc.Hub(tmp_path, STUDENTS, env={"RKNNLAB_HUB_COURSE": str(course)})
    hub.start()
    yield hub
    left = hub.stop()        # a no-op when the test stopped it; else kills what is left
    assert not left, f"processes the hub started were still running after it stopped: {left}"


def test_two_students_log_in_get_their_own_copy_and_run_a_chapter_at_once(hub, tmp_path):
    # only the allowed users get in, and only with the password
    with pytest.raises(bc.HubError, match="login refused"):
        bc.Student(hub, "mallory").login()
    with pytest.raises(bc.HubError, match="login refused"):
        bc.Student(hub, "ann", password="not-the-password").login()

    students = [bc.Student(hub, name) for name in STUDENTS]
    for s in students:
        s.login()
        s.start_server()

    # each has a personal copy of the course, made on first login, and the server opens on it
    course_lab = json.loads((ROOT / "labs" / "lab01_memory_layers.ipynb").read_text())
    solutions = sum("solution" in c["metadata"].get("tags", []) for c in course_lab["cells"])
    assert solutions > 0, "the course's lab 1 has no solution cell: pick another lab for this check"
    for s in students:
        copy = tmp_path / "homes" / s.name / "rknnlab"
        assert (copy / ".rknnlab-workspace.json").is_file(), f"{s.name} has no personal copy at {copy}"
        made_from = json.loads((copy / ".rknnlab-workspace.json").read_text())["course"]
        assert Path(made_from) == (tmp_path / "class").resolve(), \
            f"{s.name}'s copy comes from {made_from}, not from the student edition"
        top = {item["name"] for item in s.api("GET", "contents")["content"]}
        assert {"chapters", "labs", "data", "examples"} <= top, top
        lab = s.notebook("labs/lab01_memory_layers.ipynb")
        assert not [c for c in lab["cells"] if "solution" in c["metadata"].get("tags", [])], \
            f"{s.name}'s lab 1 still has solution cells"
        assert len(lab["cells"]) == len(course_lab["cells"]) - solutions
        # the per-user memory limit reaches the server (jupyter-resource-usage shows it)
        metrics = s.request("GET", f"{s.server}/api/metrics/v1").json()
        assert metrics["limits"]["memory"]["rss"] == 2 * 1024 ** 3, metrics
    # ... and it is theirs alone
    ann, bob = students
    ann.api("PUT", "contents/ann-was-here.txt", json={"type": "file", "format": "text", "content": "hi"})
    assert (tmp_path / "homes" / "ann" / "rknnlab" / "ann-was-here.txt").is_file()
    assert bob.request("GET", f"{bob.server}/api/contents/ann-was-here.txt").status_code == 404

    # both execute chapter 1 at the same time, each in a kernel of their own server
    nb = ann.notebook(CHAPTER)
    code_cells = sum(c["cell_type"] == "code" and "skip-execution" not in c["metadata"].get("tags", [])
                     for c in nb["cells"])
    kernels = [s.start_kernel(str(Path(CHAPTER).parent)) for s in students]

    async def both():
        return await asyncio.gather(*(s.execute(k, s.notebook(CHAPTER)) for s, k in zip(students, kernels)))

    runs = asyncio.run(both())
    for s, run in zip(students, runs):
        assert not run.errors, f"{s.name}: {run.errors}"
        assert run.cells == code_cells, f"{s.name}: {run.cells} of {code_cells} cells ran"
        text = run.text()
        assert "backend: sim" in text and "simulated RK3588" in text, \
            f"{s.name}: chapter 1's outputs do not come from the simulator:\n{text[:2000]}"
    for s, k in zip(students, kernels):
        s.shutdown_kernel(k)

    # stop the servers, then the hub: nothing it started may be left
    hub.record()
    started = dict(hub.seen)
    assert len(started) >= 1 + 1 + 2 * 2, f"expected the hub, its proxy, 2 servers and 2 kernels: {started}"
    for s in students:
        s.stop_server()
    left = hub.stop()
    assert not left, f"still running after the hub stopped: {left}"
    assert hub.process.returncode is not None


# --------------------------------------------------------------------------- no TLS, no start
def _load_config(monkeypatch, tmp_path, **env):
    """Execute the configuration as JupyterHub does, with a stand-in get_config."""
    from traitlets.config import Config
    for k in [k for k in os.environ if k.startswith("RKNNLAB_HUB_")]:
        monkeypatch.delenv(k)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.chdir(tmp_path)
    config = Config()
    namespace = {"get_config": lambda: config, "__file__": str(bc.CONFIG), "__name__": "jupyterhub_config"}
    exec(compile(bc.CONFIG.read_text(), str(bc.CONFIG), "exec"), namespace)
    return config


@pytest.mark.parametrize("env", [{}, {"RKNNLAB_HUB_IP": "0.0.0.0"}, {"RKNNLAB_HUB_IP": "10.1.2.3"},
                                 {"RKNNLAB_HUB_INSECURE": "0"}])
def test_the_configuration_refuses_to_start_without_tls(monkeypatch, tmp_path, env):
    with pytest.raises(SystemExit, match="no TLS"):
        _load_config(monkeypatch, tmp_path, **env)


def test_the_configuration_refuses_half_a_certificate(monkeypatch, tmp_path):
    with pytest.raises(SystemExit, match="set both"):
        _load_config(monkeypatch, tmp_path, RKNNLAB_HUB_SSL_CERT="/etc/ssl/hub.crt")


@pytest.mark.parametrize("env, ip, tls", [
    ({"RKNNLAB_HUB_IP": "127.0.0.1"}, "127.0.0.1", False),
    ({"RKNNLAB_HUB_IP": "localhost"}, "localhost", False),
    ({"RKNNLAB_HUB_INSECURE": "1"}, "", False),
    ({"RKNNLAB_HUB_SSL_CERT": "/etc/ssl/hub.crt", "RKNNLAB_HUB_SSL_KEY": "/etc/ssl/hub.key"}, "", True),
])
def test_the_configuration_starts_with_tls_behind_a_proxy_or_when_told(monkeypatch, tmp_path, env, ip, tls):
    config = _load_config(monkeypatch, tmp_path, **env)
    assert config.JupyterHub.ip == ip
    assert ("ssl_cert" in config.JupyterHub) == tls
    if tls:
        assert config.JupyterHub.ssl_cert == "/etc/ssl/hub.crt"
        assert config.JupyterHub.ssl_key == "/etc/ssl/hub.key"


def test_jupyterhub_exits_with_the_message_without_tls(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("RKNNLAB_HUB_")}
    env["RKNNLAB_HUB_PORT"] = str(bc.free_port())      # were it to start: not on a port in use
    jupyterhub = str(Path(sys.executable).parent / "jupyterhub")
    done = subprocess.run([jupyterhub, "-f", str(bc.CONFIG)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=30)
    assert done.returncode != 0, done.stdout + done.stderr
    assert "no TLS" in done.stderr and "RKNNLAB_HUB_INSECURE=1" in done.stderr, done.stderr
    assert not (tmp_path / "jupyterhub.sqlite").exists(), "it got as far as making its database"
