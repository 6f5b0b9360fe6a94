"""The student's workspace: a working copy of the course that ``make lab`` opens.

``python -m rknnlab workspace [--dir DIR]`` makes ``DIR`` (default ``workspace/`` in the
course repository, git-ignored) on first run, and brings it up to date on later runs:

* ``chapters/`` as they are; ``labs/`` as student editions (cells tagged ``solution``
  removed, the exercise prompts kept: :func:`rknnlab.book.editions.student_copy`); other
  files under chapters/ and labs/ (pictures a notebook shows) copied as they are. Two
  things change in every notebook, for JupyterLab's sake (:func:`for_jupyterlab`): the
  hidden ``<!-- c-prelude: ... -->`` comments become MyST comments (``% c-prelude: ...``),
  which jupyterlab-myst renders as nothing (an HTML comment leaves a blank line above the
  C block); and the kernel's metadata is the one this Python's kernel reports, so opening
  a notebook does not mark it modified;
* ``data`` and ``examples`` as symbolic links to the course's, so a notebook or a link
  that says ``../data/models/...`` or ``../examples/c/...`` finds them from the workspace
  as from the sources (the library itself finds data/models through
  :func:`rknnlab.paths.data_dir` wherever the notebook runs);
* the course is never copied over the student's work. Each file's content hash as
  written is recorded in ``DIR/.rknnlab-workspace.json``. On an update, a file the student
  has not edited (for a notebook: the same cells' sources, whatever outputs they hold) is
  replaced by the new version; a file they edited is left alone, and when the course's
  version changed it is written beside it as ``<name>.updated.ipynb`` (one line says so);
  a file they deleted comes back fresh (the way to start a lab over). Files the course no
  longer has stay.

Instructors open the sources instead (``make lab-instructor``).
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple, Union

#: the course's folders copied into the workspace
COPIED = ("chapters", "labs")
#: the course's folders the workspace links to (read-only material: models, traces, C)
LINKED = ("data", "examples")
MANIFEST = ".rknnlab-workspace.json"
UPDATED_SUFFIX = ".updated"
_SKIPPED_DIRS = {".ipynb_checkpoints", "__pycache__"}


class WorkspaceError(RuntimeError):
    """The workspace cannot be made where asked; the message says why."""


@dataclass
class SyncReport:
    directory: Path
    added: List[str] = field(default_factory=list)      # new to the workspace (or deleted there)
    updated: List[str] = field(default_factory=list)    # replaced: the student had not edited it
    kept: List[str] = field(default_factory=list)       # edited by the student; new version beside it
    linked: List[str] = field(default_factory=list)     # data/examples links made or repaired


def default_course_root() -> Path:
    """The course repository: the directory holding data/models (see rknnlab.paths)."""
    from .paths import repo_root
    return repo_root()


def content_hash(name: str, data: bytes) -> str:
    """What counts as an edit. For a notebook: its cells' types and sources (running it,
    which changes outputs and execution counts, is not an edit); a notebook that is not
    valid JSON any more counts by its bytes. For any other file: its bytes."""
    if name.endswith(".ipynb"):
        try:
            cells = json.loads(data.decode("utf-8"))["cells"]
            key = json.dumps([[c.get("cell_type"), _source(c.get("source", ""))] for c in cells])
            return "cells:" + hashlib.sha256(key.encode("utf-8")).hexdigest()
        except (ValueError, KeyError, TypeError, AttributeError):
            pass
    return "bytes:" + hashlib.sha256(data).hexdigest()


def _source(src: Union[str, List[str]]) -> str:
    return src if isinstance(src, str) else "".join(src)


def _course_files(course: Path) -> Iterator[Tuple[str, Path]]:
    """(path relative to the course, file) for every file the workspace copies."""
    for top in COPIED:
        base = course / top
        if not base.is_dir():
            continue
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = sorted(d for d in dirnames if d not in _SKIPPED_DIRS and not d.startswith("."))
            for name in sorted(filenames):
                if not name.startswith("."):
                    path = Path(dirpath) / name
                    yield path.relative_to(course).as_posix(), path


def student_version(path: Path) -> bytes:
    """What the workspace holds for the course file ``path``: a notebook with solution
    cells becomes its student copy, every notebook is made :func:`for_jupyterlab`;
    everything else is copied byte for byte."""
    data = path.read_bytes()
    if path.suffix != ".ipynb":
        return data
    import nbformat
    from .book import editions
    nb = nbformat.reads(data.decode("utf-8"), as_version=4)
    if editions.has_solutions(nb):
        nb = editions.student_copy(nb)
    return (nbformat.writes(for_jupyterlab(nb)) + "\n").encode("utf-8")


# a whole-line HTML comment holding a C block's hidden prelude (tests/test_notebook_c.py)
_PRELUDE_COMMENT = re.compile(r"^(?P<indent>[ \t]*)<!--\s*(?P<text>c-prelude:.*?)-->[ \t]*$",
                             re.MULTILINE | re.DOTALL)


def _as_myst_comment(match: "re.Match[str]") -> str:
    """The comment's lines, each as a MyST comment line at the comment's indentation."""
    return "\n".join((match["indent"] + "% " + line.strip()).rstrip()
                     for line in match["text"].strip().splitlines())


def for_jupyterlab(nb: Any) -> Any:
    """``nb`` (an nbformat notebook, changed in place) as JupyterLab should open it.

    * jupyterlab-myst renders an HTML comment as an empty inline <span>: a blank line
      (about 36 px) between the text and the C block under it. A MyST comment (``%``)
      renders as nothing, so the c-prelude comments become MyST comments; the cell's
      text is otherwise unchanged.
    * When its kernel starts, JupyterLab writes the kernel's own ``kernelspec`` display
      name and ``language_info`` (Python's version, the lexer...) into the notebook, which
      marks a notebook modified as soon as it opens. The workspace writes what this
      Python's kernel reports (the kernel ``make lab`` starts runs this Python), so opening
      changes nothing. What counts as an edit (:func:`content_hash`) ignores metadata
      either way."""
    for cell in nb.cells:
        if cell.cell_type == "markdown" and "c-prelude:" in cell.source:
            cell.source = _PRELUDE_COMMENT.sub(_as_myst_comment, cell.source)
    spec = nb.metadata.get("kernelspec", {})
    if spec.get("name") == "python3":
        nb.metadata.update(json.loads(_python3_kernel_metadata()))
    return nb


@functools.lru_cache(maxsize=None)
def _python3_kernel_metadata() -> str:
    """{"kernelspec": ..., "language_info": ...} (JSON) as JupyterLab writes them for
    this Python's ``python3`` kernel; {} where Jupyter is not installed."""
    try:
        from ipykernel.ipkernel import IPythonKernel
        from jupyter_client.kernelspec import KernelSpecManager
        spec = KernelSpecManager().get_kernel_spec("python3")
        return json.dumps({"kernelspec": {"display_name": spec.display_name, "language": spec.language,
                                          "name": "python3"},
                           "language_info": IPythonKernel.language_info})
    except Exception:   # no kernel here: the notebook keeps its own metadata
        return "{}"


def updated_name(rel: str) -> str:
    """labs/lab04.ipynb -> labs/lab04.updated.ipynb"""
    p = Path(rel)
    return p.with_name(p.stem + UPDATED_SUFFIX + p.suffix).as_posix()


def _check_place(course: Path, directory: Path) -> None:
    if not any((course / top).is_dir() for top in COPIED):
        raise WorkspaceError(f"{course} has no {' or '.join(COPIED)}/: is it the course repository?")
    if directory == course:
        raise WorkspaceError(f"the workspace cannot be the course itself ({course}): pick another "
                             "directory, e.g. --dir workspace")
    for top in (*COPIED, *LINKED):
        src = (course / top).resolve()
        if directory == src or src in directory.parents:
            raise WorkspaceError(f"the workspace {directory} is inside the course's {top}/: "
                                 "pick a directory outside it")
    if directory.exists() and not directory.is_dir():
        raise WorkspaceError(f"{directory} exists and is not a directory")


def _load_manifest(directory: Path) -> Dict[str, Dict[str, str]]:
    path = directory / MANIFEST
    if not path.is_file():
        return {}
    try:
        files = json.loads(path.read_text(encoding="utf-8")).get("files", {})
        return {k: v for k, v in files.items() if isinstance(v, dict) and "written" in v}
    except (ValueError, AttributeError):
        # unreadable: every existing file then counts as the student's (nothing is lost)
        return {}


def _link(course: Path, directory: Path, name: str, report: SyncReport,
          log: Callable[[str], None]) -> None:
    target = course / name
    if not target.exists():
        return
    link = directory / name
    rel = os.path.relpath(target, directory)
    if link.is_symlink():
        if os.readlink(link) == rel:
            return
        link.unlink()                       # the course moved: point the link at it again
    elif link.exists():
        log(f"  left alone  {name}/ (yours, not a link to the course's {name}/; notebooks still "
            "find the course's data through rknnlab)")
        return
    link.symlink_to(rel, target_is_directory=True)
    report.linked.append(name)


def sync_workspace(directory: Union[str, Path, None] = None, course: Union[str, Path, None] = None,
                   log: Callable[[str], None] = print) -> SyncReport:
    """Make or update the workspace ``directory`` from ``course`` (see the module doc)."""
    course = Path(course).resolve() if course else default_course_root()
    directory = Path(directory).resolve() if directory else course / "workspace"
    _check_place(course, directory)
    first = not directory.exists()
    directory.mkdir(parents=True, exist_ok=True)
    report = SyncReport(directory)
    manifest = _load_manifest(directory)
    for name in LINKED:
        _link(course, directory, name, report, log)
    for rel, src in _course_files(course):
        new = student_version(src)
        new_hash = content_hash(rel, new)
        dest = directory / rel
        record = manifest.get(rel)
        if not dest.is_file():
            _write(dest, new)
            report.added.append(rel)
            log(f"  {'new' if first else 'added':10s}  {rel}")
        else:
            current = content_hash(rel, dest.read_bytes())
            if current == new_hash:
                pass                                          # already this version
            elif record is not None and current == record["written"]:
                _write(dest, new)                             # untouched by the student
                report.updated.append(rel)
                log(f"  updated     {rel} (you had not edited it)")
            elif record is None or record["written"] != new_hash:
                # edited (or of unknown origin): theirs stays, the course's goes beside it;
                # once offered, the same version is not offered again
                _write(directory / updated_name(rel), new)
                report.kept.append(rel)
                log(f"  kept yours  {rel} (you edited it); the course's new version is "
                    f"{updated_name(rel)}")
        manifest[rel] = {"written": new_hash}
    _write(directory / MANIFEST, (json.dumps(
        {"about": "rknnlab workspace: what `python -m rknnlab workspace` last wrote for each "
                  "course file (content hashes), so it never overwrites a file you edited",
         "course": str(course), "files": dict(sorted(manifest.items()))}, indent=1) + "\n").encode())
    counts = [f"{len(v)} {k}" for k, v in (("added", report.added), ("updated", report.updated),
                                          ("of yours kept, the new version beside", report.kept)) if v]
    log(f"workspace {directory}: " + ("made from the course" if first else "up to date with the course")
        + (f" ({', '.join(counts)})" if counts and not first else "")
        + f"; open it with: jupyter lab --notebook-dir={directory}")
    return report


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)                   # never a half-written notebook


def _summary_only(line: str) -> None:
    if not line.startswith("  "):           # the per-file lines are indented
        print(line)


def main(directory: Optional[str] = None, course: Optional[str] = None, quiet: bool = False) -> int:
    """``quiet``: print the summary line only (a class server's log: one line per login)."""
    try:
        sync_workspace(directory, course, log=_summary_only if quiet else print)
    except WorkspaceError as exc:
        print(f"rknnlab workspace: {exc}")
        return 2
    return 0
