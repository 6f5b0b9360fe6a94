"""The class server (deploy/jupyterhub/jupyterhub_config.py) with two students.

Starts JupyterHub from the course's configuration on 127.0.0.1, overriding on the command
line only what a test must: a test authenticator with a shared password instead of PAM,
SimpleLocalProcessSpawner instead of LocalProcessSpawner (the same process spawner without
switching to a Unix account; the homes are under tmp_path), free ports, and the hub's
database, cookie secret and pid files in tmp_path. The allow list comes from the
configuration's own RKNNLAB_HUB_USERS. Two students log in through the login form, start
their servers (each makes its personal copy of the course on first login), and execute
chapter 1 at the same moment, each in a kernel of their own server, through the Jupyter
server's REST and websocket kernel API. Then the servers and the hub are stopped, and no
process the hub started may be left.

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
    hub = bc.Hub(tmp_path, STUDENTS)
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
