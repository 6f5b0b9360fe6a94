"""JupyterHub for a class: the course on the simulator, one server, many students.

Start it as root (PAM checks the students' passwords and the hub starts each student's
server as that student), from the directory that keeps the hub's state:

    sudo /opt/rknnlab/.venv/bin/python -m rknnlab workspace --quiet --dir /opt/rknnlab-class
    sudo mkdir -p /srv/rknnlab-hub && cd /srv/rknnlab-hub
    sudo RKNNLAB_HUB_ADMINS=teacher RKNNLAB_HUB_USERS=ann,bob \\
        RKNNLAB_HUB_COURSE=/opt/rknnlab-class \\
        RKNNLAB_HUB_SSL_CERT=/etc/ssl/hub.crt RKNNLAB_HUB_SSL_KEY=/etc/ssl/hub.key \\
        /opt/rknnlab/.venv/bin/jupyterhub -f /opt/rknnlab/deploy/jupyterhub/jupyterhub_config.py

The hub refuses to start without TLS (students type their password on its page), unless it
listens on 127.0.0.1 only (RKNNLAB_HUB_IP=127.0.0.1, behind a reverse proxy that does TLS)
or RKNNLAB_HUB_INSECURE=1.

What it does:

* **Students are Unix accounts** on the server, logging in with their Unix password (PAM).
  Only the users in ``RKNNLAB_HUB_USERS`` and the admins log in; an admin adds a student
  from the hub's admin page (Admin > Add Users): JupyterHub allows them and, because
  ``create_system_users`` is on, creates the Unix account (``adduser``, no password: set
  one with ``sudo passwd NAME`` or ``sudo chpasswd``). The names in ``RKNNLAB_HUB_USERS``
  get a Unix account the same way when the hub starts. To remove a student, delete them on
  the admin page: ``allow_existing_users`` keeps every user in the hub's database allowed,
  so taking a name out of ``RKNNLAB_HUB_USERS`` alone does not remove their access.
* **Each student gets a personal copy of the course** (``~/rknnlab`` by default), made on
  first login by ``python -m rknnlab workspace`` run as the student (rknnlab-singleuser, the
  command the hub starts), so the files are theirs. It is made from ``RKNNLAB_HUB_COURSE``:
  set it to a student edition of the course (root makes it once, and again after each
  course update: ``python -m rknnlab workspace --quiet --dir /opt/rknnlab-class``), not to
  the repository, whose labs hold the solutions (make its labs/, tests/, _build/ and .git
  root-only: ``chmod -R go-rwx``). Later logins bring new notebooks in and
  never overwrite one the student edited. JupyterLab opens on that copy.
* **The simulator**: ``RKNNLAB_BACKEND=sim`` in every student's server (no board here).
* **Per-student limits** (``mem_limit``, ``cpu_limit``). LocalProcessSpawner does NOT
  enforce them: it passes them to the server as ``MEM_LIMIT``/``CPU_LIMIT``, which the
  status bar's memory indicator (jupyter-resource-usage) shows. jupyterhub-systemdspawner
  or Kubernetes (z2jh-config.yaml, beside this file) enforce them.
* **Idle kernels are shut down** after ``RKNNLAB_HUB_IDLE`` seconds unless a notebook is
  open on them (a student reading for an hour keeps their variables), and a server with no
  kernel and no activity for twice that stops itself (the student's files stay; the next
  login starts it again), so memory goes back to the students who are working.

Everything a site changes is read from the environment variables in the block below.
"""
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

# --------------------------------------------------------------------------- the site's choices
def _env(name, default):
    value = os.environ.get(name, "").strip()
    return value if value else default


def _names(name):
    return {n.strip() for n in os.environ.get(name, "").replace(",", " ").split() if n.strip()}


#: the Python environment with rknnlab[lab] and jupyterhub installed (its python)
PYTHON = _env("RKNNLAB_HUB_PYTHON", sys.executable)
#: where the students' copies come from: the student edition of the course (made by root with
#: ``python -m rknnlab workspace --dir /opt/rknnlab-class``: labs without solution cells);
#: default: the repository itself, whose labs/ hold the solutions (fine for a test, not a class)
COURSE = _env("RKNNLAB_HUB_COURSE", str(HERE.parents[1]))
#: each student's personal copy of the course, relative to their home directory
WORKSPACE = _env("RKNNLAB_HUB_WORKSPACE", "rknnlab")
#: who may log in (students; more are added from the admin page) and who is an admin
USERS = _names("RKNNLAB_HUB_USERS")
ADMINS = _names("RKNNLAB_HUB_ADMINS")
#: per student: memory (bytes, or with a K/M/G suffix) and CPU cores (see the module doc)
MEM_LIMIT = _env("RKNNLAB_HUB_MEM_LIMIT", "2G")
CPU_LIMIT = float(_env("RKNNLAB_HUB_CPU_LIMIT", "1"))
#: seconds an idle kernel with no notebook open on it lives (a server with no kernel and no
#: activity stops after twice that); 0: never
IDLE = int(_env("RKNNLAB_HUB_IDLE", "3600"))
#: where the hub listens ('' = every interface); TLS certificate and key (required: students
#: type their Unix password here), unless the hub listens on 127.0.0.1 only, behind a reverse
#: proxy that does TLS, or RKNNLAB_HUB_INSECURE=1 (a test on a closed network)
IP = _env("RKNNLAB_HUB_IP", "")
PORT = int(_env("RKNNLAB_HUB_PORT", "8000"))
SSL_CERT = _env("RKNNLAB_HUB_SSL_CERT", "")
SSL_KEY = _env("RKNNLAB_HUB_SSL_KEY", "")
INSECURE = _env("RKNNLAB_HUB_INSECURE", "0") == "1"
#: the hub's own files (user database, cookie secret, pid files); default: the current directory
STATE = Path(_env("RKNNLAB_HUB_STATE", os.getcwd()))

# --------------------------------------------------------------------------- no password in clear text
if bool(SSL_CERT) != bool(SSL_KEY):
    raise SystemExit("jupyterhub_config.py: set both RKNNLAB_HUB_SSL_CERT and RKNNLAB_HUB_SSL_KEY "
                     "(one of them is empty)")
if not SSL_CERT and IP not in ("127.0.0.1", "localhost") and not INSECURE:
    raise SystemExit(
        "jupyterhub_config.py: no TLS. Students type their password on the hub's page, so the hub "
        "does not start without a certificate. Do one of these:\n"
        "  * set RKNNLAB_HUB_SSL_CERT and RKNNLAB_HUB_SSL_KEY (the certificate and its key);\n"
        "  * set RKNNLAB_HUB_IP=127.0.0.1 and put a reverse proxy that does TLS in front;\n"
        "  * set RKNNLAB_HUB_INSECURE=1 (passwords cross the network in clear text).")
if not (Path(COURSE) / ".rknnlab-workspace.json").is_file():
    print(f"jupyterhub_config.py: the students' copies come from {COURSE}, the course repository "
          "(its labs hold the solutions). For a class, make a student edition and point "
          "RKNNLAB_HUB_COURSE at it (see this file's doc).", file=sys.stderr)

c = get_config()  # noqa: F821  (JupyterHub provides get_config when it loads this file)

# --------------------------------------------------------------------------- where it listens
c.JupyterHub.ip = IP
c.JupyterHub.port = PORT
if SSL_CERT and SSL_KEY:
    c.JupyterHub.ssl_cert = SSL_CERT
    c.JupyterHub.ssl_key = SSL_KEY
c.JupyterHub.db_url = f"sqlite:///{STATE / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(STATE / "jupyterhub_cookie_secret")
c.JupyterHub.pid_file = str(STATE / "jupyterhub.pid")
c.ConfigurableHTTPProxy.pid_file = str(STATE / "jupyterhub-proxy.pid")

# --------------------------------------------------------------------------- who logs in
# PAM (the server's Unix accounts and passwords): JupyterHub's default authenticator
c.JupyterHub.authenticator_class = "pam"
c.Authenticator.allowed_users = USERS
c.Authenticator.admin_users = ADMINS
# users added from the admin page are allowed (and kept allowed after a restart); so every user
# in the hub's database stays allowed: to remove a student, delete them on the admin page
# (taking a name out of RKNNLAB_HUB_USERS is not enough)
c.Authenticator.allow_existing_users = True
# ... and get a Unix account if they have none (adduser; the admin then sets a password); the
# names in RKNNLAB_HUB_USERS get one the same way when the hub starts
c.LocalAuthenticator.create_system_users = True
# the admin page can open a student's server (to help them); it is logged
c.JupyterHub.admin_access = True

# --------------------------------------------------------------------------- each student's server
c.JupyterHub.spawner_class = "localprocess"
# rknnlab-singleuser: as the student, makes or updates ~/WORKSPACE, then execs jupyterhub-singleuser
c.Spawner.cmd = ["/bin/sh", str(HERE / "rknnlab-singleuser")]
c.Spawner.notebook_dir = f"~/{WORKSPACE}"
c.Spawner.default_url = "/lab"
c.Spawner.environment = {
    "RKNNLAB_BACKEND": "sim",
    "RKNNLAB_HUB_PYTHON": PYTHON,
    "RKNNLAB_HUB_COURSE": COURSE,
    "RKNNLAB_HUB_WORKSPACE": WORKSPACE,
    # the environment's commands first (a notebook's !python, the C chapters' compiler driver)
    "PATH": os.pathsep.join([str(Path(PYTHON).parent), "/usr/local/bin", "/usr/bin", "/bin"]),
}
c.Spawner.mem_limit = MEM_LIMIT
c.Spawner.cpu_limit = CPU_LIMIT
if IDLE > 0:
    c.Spawner.args = [
        f"--MappingKernelManager.cull_idle_timeout={IDLE}",
        "--MappingKernelManager.cull_interval=300",
        "--MappingKernelManager.cull_connected=False",
        f"--ServerApp.shutdown_no_activity_timeout={2 * IDLE}",
    ]
# the first login copies the course (a few seconds on a busy server): be patient
c.Spawner.start_timeout = 120
c.Spawner.http_timeout = 120
