"""The repository says under which licence everything in it may be reused.

LICENSE (MIT, the code) and LICENSE-TEXT (CC BY 4.0, the course text) exist, and every file
under data/ is covered by a `Files:` line of THIRD_PARTY.md, so nothing third-party lands
without an attribution.
"""
from __future__ import annotations

import fnmatch
import subprocess
from pathlib import Path
from typing import List

ROOT = Path(__file__).resolve().parents[1]


def _attributed_patterns() -> List[str]:
    text = (ROOT / "THIRD_PARTY.md").read_text(encoding="utf-8")
    return [line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("Files:")]


def _data_files() -> List[str]:
    listed = subprocess.run(["git", "ls-files", "data"], cwd=ROOT, capture_output=True, text=True)
    if listed.returncode == 0 and listed.stdout.strip():
        return listed.stdout.split()
    return [str(p.relative_to(ROOT)) for p in (ROOT / "data").rglob("*") if p.is_file()]


def _covered(path: str, patterns: List[str]) -> bool:
    # fnmatch's "*" crosses "/", so a pattern also has to have as many parts as the path
    return any(fnmatch.fnmatchcase(path, pattern) and pattern.count("/") == path.count("/")
               for pattern in patterns)


def test_licence_files_exist() -> None:
    assert "Permission is hereby granted" in (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert "Attribution 4.0 International" in (ROOT / "LICENSE-TEXT").read_text(encoding="utf-8")


def test_every_data_file_is_attributed() -> None:
    patterns = _attributed_patterns()
    assert patterns, "THIRD_PARTY.md has no `Files:` lines"
    missing = [path for path in _data_files() if not _covered(path, patterns)]
    assert not missing, ("files under data/ with no `Files:` line in THIRD_PARTY.md (say where "
                         "they come from and under which licence): " + ", ".join(missing))


def test_a_file_outside_every_pattern_is_caught() -> None:
    patterns = _attributed_patterns()
    assert not _covered("data/models/newmodel/weights.bin", patterns)
    assert not _covered("data/traces/sub/dir/run.json", patterns)
    assert _covered("data/models/mobilenet_v2/rk3588.rknn", patterns)
