"""Shared by the book tests: the fixture book (tests/fixtures/book, test data) copied
to tests/_build/book-fixture/ (book-fixture-gw<n>/ in pytest-xdist's worker n) and built once
per test session per (book, edition, lang)."""
from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Dict, Tuple

import pytest

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "book"
ROOT = Path(__file__).resolve().parents[1]
#: a copy per pytest-xdist worker: test files that build the fixture book may run at once
WORK = Path(__file__).resolve().parent / "_build" / (
    "book-fixture" + (f"-{os.environ['PYTEST_XDIST_WORKER']}" if os.environ.get("PYTEST_XDIST_WORKER") else ""))
ARTIFACTS = Path(__file__).resolve().parent / "_artifacts"

_built: Dict[Tuple[str, str], object] = {}
_copied = False


def book_needs():
    """Skip the module if the book extra is not installed."""
    for mod in ("sphinx", "myst_nb", "sphinx_book_theme", "nbclient", "nbconvert", "jupyter_cache"):
        pytest.importorskip(mod, reason=f"{mod} is missing: pip install -e '.[book]'")


def fixture_copy() -> Path:
    """A fresh copy of the fixture book (once per session), with an execution log."""
    global _copied
    if not _copied:
        if WORK.exists():
            shutil.rmtree(WORK)
        shutil.copytree(FIXTURE, WORK)
        _copied = True
    return WORK


def exec_log() -> Path:
    return WORK / "exec.log"


def build(edition: str = "student", lang: str = "en", book: str = "book.toml"):
    """Build the fixture book (once per session for these arguments); returns the report."""
    from rknnlab.book.build import build_book
    key = (edition, lang)
    if key not in _built:
        root = fixture_copy()
        os.environ["FIXTURE_EXEC_LOG"] = str(exec_log())
        _built[key] = build_book(root / book, lang=lang, edition=edition, backend="sim",
                                 log=lambda s: None)
    return _built[key]
