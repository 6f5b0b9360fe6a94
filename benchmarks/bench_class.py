"""How many students one server takes: chapter notebooks executing at once through JupyterHub.

    .venv/bin/python benchmarks/bench_class.py [--students 1,2,3,4,6,8] [--chapter NAME] [--repeat R]

Starts JupyterHub with deploy/jupyterhub/jupyterhub_config.py on 127.0.0.1, as
tests/test_jupyterhub.py does (a shared-password test authenticator and
SimpleLocalProcessSpawner: no Unix accounts needed; homes, database and secrets in a
temporary directory), logs in as many students as the largest N through the login form,
starts their servers (each makes its personal copy of the course, as on first login), then
for each N: N students each start a kernel in their own server and execute the same
chapter notebook of their copy at the same moment, cell after cell, through the Jupyter
server's REST and websocket kernel API (what JupyterLab's "Run All" does). Reported per N:
the median and the longest wall time per notebook (from the first cell sent to the last
reply; the kernel is started before), and the first N whose median reaches twice N = 1's.
Then memory: PSS and RSS of one student's Jupyter server and kernel, idle (kernel started,
nothing run) and after the chapter, and of the hub and its proxy, so that "how many
students fit in the server's RAM" is a division.

Default chapter: 03_bottlenecks, the one most like a class session (the reader runs
measurements one after another and plots them; 36 cells, ~15 s alone on a 2-core PC).

This module is also the test's client (tests/test_jupyterhub.py imports it): :class:`Hub`
starts and stops JupyterHub, :class:`Student` logs in, starts a server, and
:meth:`Student.execute` runs a notebook in a kernel through the kernel channels websocket.
Needs the classroom extra (jupyterhub) and configurable-http-proxy on PATH (npm).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "deploy" / "jupyterhub" / "jupyterhub_config.py"
PASSWORD = "class-shared-password"   # the test authenticator's (SharedPasswordAuthenticator: >= 8 chars)
WORKSPACE = "rknnlab"                # the config's default RKNNLAB_HUB_WORKSPACE
DEFAULT_CHAPTER = "chapters/03_bottlenecks.ipynb"


def proxy_command() -> Optional[str]:
    """configurable-http-proxy (JupyterHub's proxy, from npm), or None when it is missing."""
    return shutil.which("configurable-http-proxy")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class HubError(RuntimeError):
    """JupyterHub or a student's server did not do what was asked; the message says what."""


# --------------------------------------------------------------------------- the hub
class Hub:
    """JupyterHub from the course's configuration, with what a test must change overridden on
    the command line: the test authenticator, the spawner without user switching (homes under
    ``state/homes``), 127.0.0.1 and free ports, its files in ``state``."""

    def __init__(self, state: Path, users: Sequence[str], python: str = sys.executable,
                 extra_args: Sequence[str] = (), env: Optional[Dict[str, str]] = None):
        self.state = Path(state)
        self.homes = self.state / "homes"
        self.users = list(users)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = self.state / "jupyterhub.log"
        jupyterhub = str(Path(python).parent / "jupyterhub")
        self.command = [
            jupyterhub, "-f", str(CONFIG),
            "--JupyterHub.authenticator_class=shared-password",
            f"--SharedPasswordAuthenticator.user_password={PASSWORD}",
            "--JupyterHub.spawner_class=simple",
            f"--SimpleLocalProcessSpawner.home_dir_template={self.homes}/{{username}}",
            "--JupyterHub.ip=127.0.0.1", f"--JupyterHub.port={self.port}",
            "--JupyterHub.hub_ip=127.0.0.1", f"--JupyterHub.hub_port={free_port()}",
            f"--ConfigurableHTTPProxy.api_url=http://127.0.0.1:{free_port()}",
            f"--JupyterHub.db_url=sqlite:///{self.state / 'jupyterhub.sqlite'}",
            f"--JupyterHub.cookie_secret_file={self.state / 'jupyterhub_cookie_secret'}",
            f"--JupyterHub.pid_file={self.state / 'jupyterhub.pid'}",
            f"--ConfigurableHTTPProxy.pid_file={self.state / 'jupyterhub-proxy.pid'}",
            *extra_args,
        ]
        # the configuration's defaults, whatever the shell set, but for the class list and
        # 127.0.0.1 (without TLS the configuration starts only there), plus ``env``
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("RKNNLAB_HUB_")}
        self.env.update(RKNNLAB_HUB_USERS=",".join(self.users), RKNNLAB_HUB_PYTHON=python,
                        RKNNLAB_HUB_IP="127.0.0.1")
        self.env.update(env or {})
        self.process: Optional[subprocess.Popen] = None
        self.seen: Dict[int, object] = {}     # pid -> psutil.Process of everything it started

    def start(self, timeout: float = 60) -> "Hub":
        self.state.mkdir(parents=True, exist_ok=True)
        self.homes.mkdir(exist_ok=True)
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            # run as root (a container, CI): the spawner here does not switch users, so each
            # student's server runs as root, which Jupyter refuses unless told in the user's
            # own config (a real hub starts them as the students, never as root)
            for name in self.users:
                conf = self.homes / name / ".jupyter" / "jupyter_server_config.json"
                conf.parent.mkdir(parents=True, exist_ok=True)
                conf.write_text(json.dumps({"ServerApp": {"allow_root": True}}))
        log = open(self.log_path, "ab")
        self.process = subprocess.Popen(self.command, cwd=self.state, env=self.env, stdout=log,
                                        stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        import requests
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.record()
            if self.process.poll() is not None:
                self.stop()
                raise HubError(f"jupyterhub exited ({self.process.returncode}):\n{self.log_tail()}")
            try:
                if requests.get(f"{self.url}/hub/health", timeout=2).status_code == 200:
                    self.record()
                    return self
            except requests.RequestException:
                pass
            time.sleep(0.3)
        self.stop()             # the proxy it may have started too
        raise HubError(f"jupyterhub did not answer within {timeout:.0f} s:\n{self.log_tail()}")

    def record(self) -> None:
        """Remember every process the hub started so far (proxy, servers, kernels)."""
        import psutil
        try:
            hub = psutil.Process(self.process.pid)
            for p in [hub, *hub.children(recursive=True)]:
                self.seen.setdefault(p.pid, p)
        except psutil.NoSuchProcess:
            pass

    def alive(self) -> List[str]:
        """What is still running of what the hub started (psutil's is_running checks the
        start time too, so a reused pid does not count)."""
        out = []
        for p in self.seen.values():
            try:
                if p.is_running() and p.status() != "zombie":
                    out.append(f"{p.pid} {' '.join(p.cmdline())[:120]}")
            except Exception:       # gone between the two calls
                pass
        return out

    def stop(self, timeout: float = 30) -> List[str]:
        """SIGTERM the hub (it stops the servers it started and its proxy), wait; kill what is
        left after ``timeout``. Returns what had to be killed (empty: a clean stop)."""
        if self.process is None:
            return []
        self.record()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                pass
        deadline = time.monotonic() + 10
        while self.alive() and time.monotonic() < deadline:
            time.sleep(0.2)
        left = self.alive()
        for p in self.seen.values():
            try:
                if p.is_running():
                    p.kill()
            except Exception:
                pass
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        return left

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def __enter__(self) -> "Hub":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


# --------------------------------------------------------------------------- a student
class Student:
    """One student in a browser: a session with the hub's cookies."""

    def __init__(self, hub: Hub, name: str, password: str = PASSWORD):
        import requests
        self.hub, self.name, self.password = hub, name, password
        self.http = requests.Session()
        self.server = f"{hub.url}/user/{name}"

    # ---- cookies and XSRF, as a browser holds them
    def _xsrf(self, url: str) -> str:
        """The _xsrf cookie the browser would send to ``url`` (the hub's and each server's
        have their own paths)."""
        path = urlparse(url).path
        best, value = "", ""
        for cookie in self.http.cookies:
            if cookie.name == "_xsrf" and path.startswith(cookie.path) and len(cookie.path) > len(best):
                best, value = cookie.path, cookie.value
        return value

    def cookie_header(self, url: str) -> str:
        import requests
        prepared = self.http.prepare_request(requests.Request("GET", url))
        return prepared.headers.get("Cookie", "")

    def request(self, method: str, url: str, **kw):
        headers = kw.pop("headers", {})
        xsrf = self._xsrf(url)
        if xsrf:
            headers["X-XSRFToken"] = xsrf
        return self.http.request(method, url, headers=headers, timeout=kw.pop("timeout", 30), **kw)

    # ---- the hub
    def login(self) -> None:
        """The login form, as a student fills it in."""
        page = self.http.get(f"{self.hub.url}/hub/login", timeout=30)
        page.raise_for_status()
        form = re.search(r'name="_xsrf"\s+value="([^"]+)"', page.text)
        data = {"username": self.name, "password": self.password}
        if form:
            data["_xsrf"] = form.group(1)
        r = self.http.post(f"{self.hub.url}/hub/login?next=", data=data, allow_redirects=False, timeout=30)
        if r.status_code != 302 or not any(c.name.startswith("jupyterhub-hub-login") for c in self.http.cookies):
            raise HubError(f"{self.name}: login refused ({r.status_code})")

    def start_server(self, timeout: float = 120) -> float:
        """Start the student's server (as the hub's /hub/spawn does when they log in) and
        wait until it answers; returns the seconds taken."""
        started = time.monotonic()
        self.http.get(f"{self.hub.url}/hub/spawn", timeout=30)
        deadline = started + timeout
        while time.monotonic() < deadline:
            r = self.request("GET", f"{self.hub.url}/hub/api/user")
            if r.status_code == 200:
                server = r.json().get("servers", {}).get("", {})
                if server.get("ready"):
                    break
                if not server and not r.json().get("pending"):
                    raise HubError(f"{self.name}: the server stopped while starting:\n{self.hub.log_tail()}")
            time.sleep(0.5)
        else:
            raise HubError(f"{self.name}: server not ready within {timeout:.0f} s:\n{self.hub.log_tail()}")
        # the browser then opens JupyterLab: the server's OAuth round trip sets its cookies
        r = self.http.get(f"{self.server}/lab", timeout=30)
        if r.status_code != 200:
            raise HubError(f"{self.name}: /user/{self.name}/lab answered {r.status_code}")
        self.hub.record()
        return time.monotonic() - started

    def stop_server(self, timeout: float = 60) -> None:
        r = self.request("DELETE", f"{self.hub.url}/hub/api/users/{self.name}/server")
        if r.status_code not in (202, 204):
            raise HubError(f"{self.name}: stopping the server answered {r.status_code}: {r.text[:200]}")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            user = self.request("GET", f"{self.hub.url}/hub/api/user").json()
            if not user.get("servers") and not user.get("pending"):
                return
            time.sleep(0.3)
        raise HubError(f"{self.name}: server still running {timeout:.0f} s after the stop")

    # ---- the student's Jupyter server
    def api(self, method: str, path: str, **kw):
        r = self.request(method, f"{self.server}/api/{path}", **kw)
        if r.status_code >= 400:
            raise HubError(f"{self.name}: {method} /api/{path} answered {r.status_code}: {r.text[:200]}")
        return r.json() if r.content else None

    def notebook(self, path: str) -> dict:
        return self.api("GET", f"contents/{path}?content=1")["content"]

    def start_kernel(self, folder: str) -> str:
        kernel = self.api("POST", "kernels", json={"name": "python3", "path": folder})
        self.hub.record()
        return kernel["id"]

    def shutdown_kernel(self, kernel_id: str) -> None:
        self.api("DELETE", f"kernels/{kernel_id}")

    async def execute(self, kernel_id: str, nb: dict, cell_timeout: float = 300) -> "Run":
        """Run the notebook's code cells in order in the kernel, through
        /api/kernels/<id>/channels, as JupyterLab's Run All does. A cell tagged
        ``raises-exception`` may fail (as in nbclient); ``skip-execution`` is skipped."""
        from tornado.httpclient import HTTPRequest
        from tornado.websocket import websocket_connect
        url = f"{self.server}/api/kernels/{kernel_id}/channels".replace("http://", "ws://")
        http_url = f"{self.server}/api/kernels/{kernel_id}/channels"
        headers = {"Cookie": self.cookie_header(http_url)}
        xsrf = self._xsrf(http_url)
        if xsrf:
            headers["X-XSRFToken"] = xsrf
        ws = await websocket_connect(HTTPRequest(url, headers=headers), max_message_size=256 << 20)
        run = Run(self.name)
        session = uuid.uuid4().hex
        try:
            await _request(ws, session, "kernel_info_request", {}, cell_timeout)
            run.started = time.monotonic()
            for index, cell in enumerate(nb["cells"]):
                if cell["cell_type"] != "code":
                    continue
                tags = set(cell.get("metadata", {}).get("tags", []))
                if "skip-execution" in tags:
                    continue
                source = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
                reply, outputs = await _request(ws, session, "execute_request", {
                    "code": source, "silent": False, "store_history": True, "user_expressions": {},
                    "allow_stdin": False, "stop_on_error": True}, cell_timeout)
                run.cells += 1
                run.outputs.extend(outputs)
                if reply["content"]["status"] != "ok" and "raises-exception" not in tags:
                    err = reply["content"]
                    run.errors.append(f"cell {index}: {err.get('ename')}: {err.get('evalue')}")
                    break
            run.finished = time.monotonic()
        finally:
            ws.close()
        return run


class Run:
    """One notebook's execution: cells run, outputs (iopub messages' contents), errors, times."""

    def __init__(self, student: str):
        self.student = student
        self.cells = 0
        self.outputs: List[dict] = []
        self.errors: List[str] = []
        self.started = self.finished = 0.0

    @property
    def seconds(self) -> float:
        return self.finished - self.started

    def text(self) -> str:
        """Every output as text (streams, results' and displays' text/plain, errors)."""
        parts = []
        for out in self.outputs:
            if "text" in out:
                parts.append(out["text"])
            elif "data" in out:
                parts.append(str(out["data"].get("text/plain", "")))
                parts.append(str(out["data"].get("text/html", "")))
            elif "ename" in out:
                parts.append(f"{out['ename']}: {out['evalue']}")
        return "\n".join(parts)


async def _request(ws, session: str, msg_type: str, content: dict, timeout: float):
    """Send one shell request; return its reply and the iopub outputs it produced (its
    status went back to idle)."""
    msg_id = uuid.uuid4().hex
    await ws.write_message(json.dumps({
        "header": {"msg_id": msg_id, "msg_type": msg_type, "session": session, "username": "",
                   "version": "5.3", "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
        "parent_header": {}, "metadata": {}, "content": content, "channel": "shell", "buffers": []}))
    reply, idle, outputs = None, False, []
    deadline = time.monotonic() + timeout
    while reply is None or not idle:
        left = deadline - time.monotonic()
        if left <= 0:
            raise HubError(f"{msg_type}: no reply within {timeout:.0f} s")
        raw = await asyncio.wait_for(ws.read_message(), left)
        if raw is None:
            raise HubError(f"{msg_type}: the kernel channel closed")
        if isinstance(raw, bytes):
            continue            # binary buffers (widgets): not ours to read
        msg = json.loads(raw)
        if msg.get("parent_header", {}).get("msg_id") != msg_id:
            continue
        kind = msg["header"]["msg_type"]
        if msg.get("channel") == "shell":
            reply = msg
        elif kind == "status":
            idle = msg["content"]["execution_state"] == "idle"
        elif kind in ("stream", "execute_result", "display_data", "error"):
            outputs.append(msg["content"])
    return reply, outputs


# --------------------------------------------------------------------------- memory
def server_processes(name: str):
    """The student's Jupyter server (the process whose JUPYTERHUB_USER is ``name`` and that
    runs jupyterhub-singleuser) and its kernels."""
    import psutil
    for p in psutil.process_iter(["cmdline"]):
        try:
            if any("jupyterhub-singleuser" in a for a in (p.info["cmdline"] or [])) \
                    and p.environ().get("JUPYTERHUB_USER") == name:
                return p, p.children(recursive=True)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    raise HubError(f"no jupyterhub-singleuser process for {name}")


def memory(processes: Iterable) -> Dict[str, float]:
    """PSS and RSS in MiB, summed (PSS shares the pages two processes map between them:
    the sum of PSS over every student is what the machine's RAM holds)."""
    pss = rss = 0
    for p in processes:
        info = p.memory_full_info()
        pss += info.pss
        rss += info.rss
    return {"pss": pss / 2**20, "rss": rss / 2**20}


# --------------------------------------------------------------------------- the measurement
def machine() -> str:
    import psutil
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (f"{os.cpu_count()} cores ({model or 'unknown CPU'}), "
            f"{psutil.virtual_memory().total / 2**30:.1f} GiB RAM, load average {load} before the run")


async def _round(students: Sequence[Student], chapter: str, nb: dict) -> List[Run]:
    kernels = [s.start_kernel(str(Path(chapter).parent)) for s in students]
    try:
        runs = await asyncio.gather(*(s.execute(k, nb) for s, k in zip(students, kernels)))
    finally:
        for s, k in zip(students, kernels):
            s.shutdown_kernel(k)
    for run in runs:
        if run.errors:
            raise HubError(f"{run.student}: {run.errors}")
    return list(runs)


def measure(counts: Sequence[int], chapter: str, repeat: int, state: Path) -> None:
    print(f"machine: {machine()}")
    print(f"chapter: {chapter}, executed in each student's own copy, in its own kernel, all "
          f"started at once through JupyterHub\n")
    names = [f"student{i + 1}" for i in range(max(counts))]
    with Hub(state, names) as hub:
        students = [Student(hub, n) for n in names]
        for s in students:
            s.login()
            s.start_server()
        nb = students[0].notebook(chapter)
        # memory of one student, from a fresh kernel to the end of the chapter
        first = students[0]
        server, _ = server_processes(first.name)
        mem = {"server alone": memory([server])}
        kernel = first.start_kernel(str(Path(chapter).parent))
        time.sleep(3)
        server, kids = server_processes(first.name)
        mem["server + kernel, idle"] = memory([server, *kids])
        cpu0 = sum(sum(k.cpu_times()[:4]) for k in kids)
        alone = asyncio.run(first.execute(kernel, nb))
        server, kids = server_processes(first.name)
        mem["server + kernel, after the chapter"] = memory([server, *kids])
        cpu = sum(sum(k.cpu_times()[:4]) for k in kids) - cpu0
        first.shutdown_kernel(kernel)
        import psutil
        hub_proc = psutil.Process(hub.process.pid)
        proxy = [p for p in hub_proc.children() if "configurable-http-proxy" in " ".join(p.cmdline())]
        mem["hub + proxy (once per server)"] = memory([hub_proc, *proxy])

        print(f"one student alone: {alone.seconds:.1f} s wall; CPU time of the kernel and the "
              f"processes it ran: {cpu:.1f} s ({cpu / alone.seconds:.2f} of a core while it runs)\n")
        print(f"{'N':>3} {'median s':>9} {'max s':>7} {'x N=1':>6}   (per notebook; {repeat} round(s) each)")
        base = None
        doubled = None
        rows = []
        for n in counts:
            times: List[float] = []
            for _ in range(repeat):
                times += [r.seconds for r in asyncio.run(_round(students[:n], chapter, nb))]
            med, worst = statistics.median(times), max(times)
            base = base or med
            rows.append((n, med, worst, med / base))
            print(f"{n:>3} {med:9.1f} {worst:7.1f} {med / base:6.2f}", flush=True)
            if doubled is None and med >= 2 * base:
                doubled = n
        print(f"\nmedian reaches 2x N=1 at N = {doubled if doubled else f'> {max(counts)}'}")
        print(f"load average after the run: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
        print("\nmemory (MiB)                              PSS      RSS")
        for what, m in mem.items():
            print(f"  {what:38s} {m['pss']:7.0f}  {m['rss']:7.0f}")
        per = mem["server + kernel, after the chapter"]["pss"]
        total = psutil.virtual_memory().total / 2**20
        print(f"\nstudents whose server + kernel (after the chapter, PSS) fit in this machine's "
              f"{total / 1024:.0f} GiB, less 2 GiB for the system and the hub: {int((total - 2048) // per)}")
        left = hub.stop()
        if left:
            print(f"had to kill: {left}")


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", default="1,2,3,4,6,8",
                        help="numbers of students executing at once (default: 1,2,3,4,6,8)")
    parser.add_argument("--chapter", default=DEFAULT_CHAPTER,
                        help=f"notebook, relative to the copy (default: {DEFAULT_CHAPTER})")
    parser.add_argument("--repeat", type=int, default=1, help="rounds per N (default 1)")
    args = parser.parse_args(argv)
    if proxy_command() is None:
        print("configurable-http-proxy not found: npm install -g configurable-http-proxy")
        return 2
    counts = [int(x) for x in args.students.split(",")]
    with tempfile.TemporaryDirectory(prefix="rknnlab-class-") as tmp:
        measure(counts, args.chapter, args.repeat, Path(tmp))
    return 0


if __name__ == "__main__":
    sys.exit(main())
