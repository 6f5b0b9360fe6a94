"""Where the course's files are: the repository, its data/, data/models/ and data/frames/.

The course models live at the top of the repository (data/models/), not inside the
package. They are found, in this order:

1. the environment variable ``RKNNLAB_DATA``: the data directory itself (the one that
   holds ``models/`` and ``traces/``);
2. walking up from this file (an editable install or a plain checkout) to the first
   directory holding ``data/models``;
3. walking up from the current working directory the same way (a notebook started
   inside a clone while the package was installed non-editable).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator, Optional

ENV_DATA = "RKNNLAB_DATA"


class DataNotFoundError(FileNotFoundError):
    """The course's data directory (data/models) could not be found."""


def _ancestors(start: Path) -> Iterator[Path]:
    start = start.resolve()
    yield start
    yield from start.parents


def _search_starts() -> list[Path]:
    starts = [Path(__file__).resolve().parent]
    try:
        starts.append(Path.cwd())
    except OSError:  # the cwd was deleted
        pass
    return starts


def _find_up(marker: str) -> Optional[Path]:
    for start in _search_starts():
        for d in _ancestors(start):
            if (d / marker).is_dir():
                return d
    return None


def _hint() -> str:
    return (f"Run from a clone of the course repository (pip install -e . there), or set "
            f"{ENV_DATA} to the repository's data directory, e.g. "
            f"export {ENV_DATA}=/path/to/rknnlab/data")


def repo_root() -> Path:
    """The repository root: the first directory above this file (then above the cwd)
    that holds data/models; failing that, one that holds a source checkout
    (pyproject.toml and lib/rknnlab). Raises DataNotFoundError if neither is found."""
    found = _find_up(os.path.join("data", "models"))
    if found is not None:
        return found
    for start in _search_starts():
        for d in _ancestors(start):
            if (d / "pyproject.toml").is_file() and (d / "lib" / "rknnlab").is_dir():
                return d
    raise DataNotFoundError(
        "cannot find the rknnlab repository (a directory holding data/models) above "
        f"{Path(__file__).resolve().parent} or the current directory. " + _hint())


def data_dir() -> Path:
    """The data directory (holds models/ and traces/). ``RKNNLAB_DATA`` overrides."""
    env = os.environ.get(ENV_DATA)
    if env:
        p = Path(env).expanduser()
        if not p.is_dir():
            raise DataNotFoundError(f"{ENV_DATA}={env} is not a directory. " + _hint())
        return p.resolve()
    d = repo_root() / "data"
    if not d.is_dir():
        raise DataNotFoundError(f"{d} does not exist. " + _hint())
    return d


def models_dir() -> Path:
    """data/models: one directory per course model (model.onnx, <soc>.rknn,
    <soc>.report.json)."""
    d = data_dir() / "models"
    if not d.is_dir():
        raise DataNotFoundError(f"{d} does not exist (no course models there). " + _hint())
    return d


def frames_dir() -> Path:
    """data/frames: the real images chapter 6's camera sequence is made from (PNG; see
    its README for origin and licence)."""
    d = data_dir() / "frames"
    if not d.is_dir():
        raise DataNotFoundError(f"{d} does not exist (no frames there). " + _hint())
    return d
