"""What the processes of one test session share: a directory, the time the session began,
and file locks.

``make test`` runs the suite in several processes (pytest-xdist's workers); a plain
``pytest`` run is one process. The process that starts the session (pytest-xdist's
controller, or the only process) calls :func:`begin`, which puts the directory and the
start time into the environment, so the workers it starts find them there; :func:`end`
removes the directory. The locks are ``flock`` locks on files in that directory: the
kernel releases them when a process dies, so a crashed worker cannot leave one held.
"""
from __future__ import annotations

import os
import shutil
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Iterator, Optional

try:
    import fcntl
except ImportError:     # not POSIX: one process only, so nothing to lock against
    fcntl = None        # type: ignore[assignment]

_DIR = "RKNNLAB_TEST_SESSION_DIR"
_STARTED = "RKNNLAB_TEST_SESSION_STARTED"


def begin() -> None:
    """Start a session (in the process that starts the workers, before it starts them)."""
    os.environ[_DIR] = tempfile.mkdtemp(prefix="rknnlab-test-session-")
    os.environ[_STARTED] = repr(time.time())


def end() -> None:
    """Remove the session's directory (in the process that called :func:`begin`)."""
    path = os.environ.pop(_DIR, None)
    os.environ.pop(_STARTED, None)
    if path:
        shutil.rmtree(path, ignore_errors=True)


def directory() -> Path:
    """The session's directory, shared by its processes."""
    if _DIR not in os.environ:      # imported outside a pytest session (begin() not called)
        begin()
    return Path(os.environ[_DIR])


def started() -> float:
    """When the session began (a time.time() value), the same in every process."""
    directory()
    return float(os.environ[_STARTED])


@contextmanager
def lock(name: str, shared: bool = False) -> Iterator[None]:
    """Hold the session's lock ``name`` (``shared``: with other shared holders) until the
    block ends."""
    f = acquire(name, shared)
    try:
        yield
    finally:
        release(f)


def acquire(name: str, shared: bool = False, blocking: bool = True) -> Optional[IO[str]]:
    """Take the session's lock ``name`` (``shared``: with other shared holders); give what
    this returns to :func:`release`. Not ``blocking``: None when another process holds it."""
    f = open(directory() / f"{name}.lock", "a+", encoding="utf-8")
    if fcntl is None:
        return f
    mode = (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | (0 if blocking else fcntl.LOCK_NB)
    try:
        fcntl.flock(f, mode)
    except BlockingIOError:
        f.close()
        return None
    except BaseException:   # e.g. pytest-timeout's alarm while waiting
        f.close()
        raise
    return f


def release(f: Optional[IO[str]]) -> None:
    if f is not None:
        f.close()       # closing the file releases its flock
