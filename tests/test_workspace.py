"""`python -m rknnlab workspace`: the student's working copy of the course (rknnlab.workspace)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat", reason="nbformat comes with the lab extra")

from rknnlab.workspace import (MANIFEST, WorkspaceError, content_hash,  # noqa: E402
                               sync_workspace, updated_name)

ROOT = Path(__file__).resolve().parents[1]
LAB = "labs/lab01.ipynb"
CHAPTER = "chapters/01_intro.ipynb"


def _lab(prompt="def f():\n    raise NotImplementedError", solution="def f():\n    return 42  # SOLUTION-TEXT"):
    sol = nbformat.v4.new_code_cell(solution)
    sol.metadata["tags"] = ["solution"]
    return nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# Lab 1\n\n**What to do.** Write `f()`."),
        nbformat.v4.new_code_cell(prompt), sol,
        nbformat.v4.new_code_cell("print('f defined:', 'f' in dir())")])


def _write(path: Path, nb) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(path))


@pytest.fixture()
def course(tmp_path) -> Path:
    c = tmp_path / "course"
    _write(c / CHAPTER, nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# Intro"),
                                                        nbformat.v4.new_code_cell("1 + 1")]))
    _write(c / LAB, _lab())
    (c / "chapters" / "figures").mkdir()
    (c / "chapters" / "figures" / "plan.svg").write_text("<svg/>")
    (c / "chapters" / ".ipynb_checkpoints").mkdir()
    (c / "chapters" / ".ipynb_checkpoints" / "01_intro-checkpoint.ipynb").write_text("{}")
    (c / "data" / "models" / "m").mkdir(parents=True)
    (c / "examples" / "c").mkdir(parents=True)
    (c / "examples" / "c" / "demo.c").write_text("int main(void) { return 0; }\n")
    return c


def _sync(course, ws):
    lines = []
    rep = sync_workspace(ws, course, log=lines.append)
    return rep, "\n".join(lines)


def _sources(path: Path):
    return [c.source for c in nbformat.read(str(path), as_version=4).cells]


def test_first_run_copies_chapters_as_they_are_and_labs_without_solutions(course, tmp_path):
    ws = tmp_path / "ws"
    rep, out = _sync(course, ws)
    assert sorted(rep.added) == ["chapters/01_intro.ipynb", "chapters/figures/plan.svg", LAB]
    assert (ws / CHAPTER).read_bytes() == (course / CHAPTER).read_bytes()
    assert (ws / "chapters" / "figures" / "plan.svg").read_text() == "<svg/>"
    assert not (ws / "chapters" / ".ipynb_checkpoints").exists()
    lab = nbformat.read(str(ws / LAB), as_version=4)
    nbformat.validate(lab)
    text = json.dumps(lab)
    assert "SOLUTION-TEXT" not in text and '"solution"' not in text
    assert [c.source for c in lab.cells] == [s for i, s in enumerate(_sources(course / LAB)) if i != 2]
    assert "rknnlab" not in text, "no build bookkeeping in the student's notebook"
    # the links: ../data and ../examples from a notebook's folder reach the course's
    assert (ws / "labs" / ".." / "data" / "models" / "m").is_dir()
    assert (ws / "chapters" / ".." / "examples" / "c" / "demo.c").is_file()
    assert os.readlink(ws / "data") == os.path.relpath(course / "data", ws)
    assert "new         labs/lab01.ipynb" in out and "made from the course" in out


def test_update_adds_new_updates_untouched_and_never_overwrites_an_edited_notebook(course, tmp_path):
    ws = tmp_path / "ws"
    _sync(course, ws)
    # the student edits the lab (their answer) and runs the chapter (outputs only: not an edit)
    lab = nbformat.read(str(ws / LAB), as_version=4)
    lab.cells[1].source = "def f():\n    return 41  # MY-ANSWER"
    nbformat.write(lab, str(ws / LAB))
    ch = nbformat.read(str(ws / CHAPTER), as_version=4)
    ch.cells[1].outputs = [nbformat.v4.new_output("execute_result", {"text/plain": "2"}, execution_count=1)]
    ch.cells[1].execution_count = 1
    nbformat.write(ch, str(ws / CHAPTER))
    # the course changes both, and adds a lab
    _write(course / LAB, _lab(prompt="def f():\n    raise NotImplementedError  # v2"))
    _write(course / CHAPTER, nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# Intro v2")]))
    _write(course / "labs" / "lab02.ipynb", _lab())
    rep, out = _sync(course, ws)
    assert rep.added == ["labs/lab02.ipynb"] and rep.updated == [CHAPTER] and rep.kept == [LAB]
    assert _sources(ws / CHAPTER) == ["# Intro v2"]
    assert "MY-ANSWER" in _sources(ws / LAB)[1], "the student's edit must survive"
    beside = ws / updated_name(LAB)
    assert beside.name == "lab01.updated.ipynb"
    assert "# v2" in _sources(beside)[1] and "SOLUTION-TEXT" not in beside.read_text()
    assert f"kept yours  {LAB} (you edited it); the course's new version is labs/lab01.updated.ipynb" in out
    # nothing changed since: nothing is offered again, nothing printed about the lab
    rep, out = _sync(course, ws)
    assert (rep.added, rep.updated, rep.kept) == ([], [], []) and LAB not in out
    assert "MY-ANSWER" in _sources(ws / LAB)[1]
    # the course changes the lab again: the new version is offered again
    _write(course / LAB, _lab(prompt="def f():\n    raise NotImplementedError  # v3"))
    rep, out = _sync(course, ws)
    assert rep.kept == [LAB] and "# v3" in _sources(beside)[1] and "MY-ANSWER" in _sources(ws / LAB)[1]


def test_a_deleted_notebook_comes_back_fresh_and_a_notebook_the_student_made_stays(course, tmp_path):
    ws = tmp_path / "ws"
    _sync(course, ws)
    (ws / LAB).unlink()
    mine = ws / "labs" / "my_notes.ipynb"
    _write(mine, nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("mine")]))
    rep, _ = _sync(course, ws)
    assert rep.added == [LAB] and (ws / LAB).is_file() and mine.is_file()


def test_a_lost_manifest_loses_nothing(course, tmp_path):
    ws = tmp_path / "ws"
    _sync(course, ws)
    lab = nbformat.read(str(ws / LAB), as_version=4)
    lab.cells[1].source = "# MY-ANSWER"
    nbformat.write(lab, str(ws / LAB))
    (ws / MANIFEST).write_text("not json")
    _write(course / LAB, _lab(prompt="# v2"))
    rep, _ = _sync(course, ws)
    assert rep.kept == [LAB] and rep.updated == []
    assert "MY-ANSWER" in (ws / LAB).read_text()


def test_running_is_not_editing_but_changing_a_source_is():
    nb = _lab()
    base = content_hash("x.ipynb", nbformat.writes(nb).encode())
    nb.cells[1].outputs = [nbformat.v4.new_output("stream", text="hi")]
    nb.cells[1].execution_count = 3
    nb.metadata["widgets"] = {"state": {}}
    assert content_hash("x.ipynb", nbformat.writes(nb).encode()) == base
    nb.cells[1].source += "\n# edit"
    assert content_hash("x.ipynb", nbformat.writes(nb).encode()) != base
    assert content_hash("x.ipynb", b"{broken").startswith("bytes:")


@pytest.mark.parametrize("where", ["course", "course/labs/ws", "course/data/ws"])
def test_bad_places_are_refused_with_a_reason(course, tmp_path, where):
    with pytest.raises(WorkspaceError):
        sync_workspace(tmp_path / where, course, log=lambda s: None)
    assert not (course / "labs" / "ws").exists() and not (course / "data" / "ws").exists()


def test_the_real_course_lab_in_the_workspace_runs_without_solutions_and_finds_the_models(tmp_path):
    """The workspace made from this repository: the lab has its prompts and no solution;
    run from the workspace (as JupyterLab runs it), it finds data/models and runs to the end."""
    pytest.importorskip("nbclient")
    from nbclient import NotebookClient
    ws = tmp_path / "ws"
    rep, _ = _sync(ROOT, ws)
    labs = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "labs").glob("*.ipynb"))
    assert labs and set(labs) <= set(rep.added)
    for rel in labs:
        src = nbformat.read(str(ROOT / rel), as_version=4)
        mine = nbformat.read(str(ws / rel), as_version=4)
        solutions = [c for c in src.cells if "solution" in c.metadata.get("tags", [])]
        assert solutions, f"{rel} has solution cells in the source"
        assert len(mine.cells) == len(src.cells) - len(solutions)
        assert not any("solution" in c.metadata.get("tags", []) for c in mine.cells)
        assert not any(c.source == s.source for c in mine.cells for s in solutions)
    lab = ws / "labs" / "lab04_output_reuse.ipynb"
    nb = nbformat.read(str(lab), as_version=4)
    env_before = os.environ.get("RKNNLAB_BACKEND")
    os.environ["RKNNLAB_BACKEND"] = "sim"
    try:
        NotebookClient(nb, timeout=300, kernel_name="python3",
                       resources={"metadata": {"path": str(lab.parent)}}).execute()
    finally:
        if env_before is None:
            os.environ.pop("RKNNLAB_BACKEND", None)
        else:
            os.environ["RKNNLAB_BACKEND"] = env_before
    text = json.dumps([o for c in nb.cells if c.cell_type == "code" for o in c.outputs])
    assert "Traceback" not in text and '"error"' not in text
    # a kernel started in the workspace finds the course's models
    proc = subprocess.run([sys.executable, "-c", "from rknnlab.paths import models_dir; print(models_dir())"],
                          cwd=str(ws / "labs"), capture_output=True, text=True, timeout=60,
                          env={k: v for k, v in os.environ.items() if k != "RKNNLAB_DATA"})
    assert proc.returncode == 0 and Path(proc.stdout.strip()) == (ROOT / "data" / "models").resolve()


def test_cli_and_make_lab_use_the_workspace(course, tmp_path):
    ws = tmp_path / "ws"
    proc = subprocess.run([sys.executable, "-m", "rknnlab", "workspace", "--dir", str(ws),
                           "--course", str(course)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "made from the course" in proc.stdout and (ws / LAB).is_file()
    assert len(proc.stdout.splitlines()) > 3                  # a line per file
    quiet = subprocess.run([sys.executable, "-m", "rknnlab", "workspace", "--quiet", "--dir", str(tmp_path / "ws2"),
                            "--course", str(course)], capture_output=True, text=True, timeout=120)
    assert quiet.returncode == 0, quiet.stderr
    summary = [ln for ln in proc.stdout.splitlines() if not ln.startswith("  ")]
    assert quiet.stdout.splitlines() == [ln.replace(str(ws), str(tmp_path / "ws2")) for ln in summary]
    assert len(quiet.stdout.splitlines()) == 1 and "made from the course" in quiet.stdout
    proc = subprocess.run([sys.executable, "-m", "rknnlab", "workspace", "--dir", str(course / "labs"),
                           "--course", str(course)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "inside the course's labs/" in proc.stdout
    make = shutil.which("make")
    if make:
        dry = subprocess.run([make, "-n", "lab", "lab-instructor"], cwd=str(ROOT), capture_output=True,
                             text=True, timeout=60)
        assert dry.returncode == 0, dry.stderr
        assert "-m rknnlab workspace --dir workspace" in dry.stdout
        assert "--notebook-dir=workspace" in dry.stdout and "--notebook-dir=." in dry.stdout
    ignored = subprocess.run(["git", "check-ignore", "-q", "workspace/labs/x.ipynb"], cwd=str(ROOT))
    assert ignored.returncode == 0, "workspace/ must be git-ignored"


def _chapter_with_c(prelude_lines):
    md = ("Some text.\n\n" + "\n".join(prelude_lines) + "\n```c\nrknn_destroy(ctx);\n```\n\n"
          "- a list item\n\n  <!-- c-prelude: int x = 1; -->\n  ```c\n  x++;\n  ```\n\n"
          "<!-- an author's note, not a prelude -->\n")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(md), nbformat.v4.new_code_cell("1 + 1")])
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    nb.metadata["language_info"] = {"name": "python"}
    return nb


@pytest.mark.parametrize("prelude", [["<!-- c-prelude: rknn_context ctx = 0; -->"],
                                     ["<!-- c-prelude: #include <malloc.h>", "rknn_context ctx = 0; -->"],
                                     ["<!--", "c-prelude: rknn_context ctx = 0;", "-->"]])
def test_c_preludes_become_myst_comments_in_the_workspace(course, tmp_path, prelude):
    """jupyterlab-myst renders an HTML comment as an empty span (a blank line above the C
    block; tests/test_jupyterlab_browser.py measures it) and a MyST comment as nothing."""
    _write(course / CHAPTER, _chapter_with_c(prelude))
    ws = tmp_path / "ws"
    _sync(course, ws)
    src, mine = _sources(course / CHAPTER)[0], _sources(ws / CHAPTER)[0]
    assert "c-prelude" not in mine.replace("% c-prelude:", ""), mine
    assert "\n% c-prelude: " in mine and "\n  % c-prelude: int x = 1;\n  ```c" in mine
    assert "rknn_context ctx = 0;\n```c\nrknn_destroy(ctx);" in mine, "the prelude stays right above its block"
    assert "<!-- an author's note, not a prelude -->" in mine, "other comments are the author's business"
    assert len(mine.splitlines()) == len(src.splitlines()) - (len(prelude) == 3) * 2
    # the source keeps its HTML comment: tests/test_notebook_c.py and the book read it
    assert prelude[0] in src


def _kernel_info_language_info():
    """language_info as a real python3 kernel reports it (what JupyterLab writes on open)."""
    jupyter_client = pytest.importorskip("jupyter_client")
    km, kc = jupyter_client.manager.start_new_kernel(kernel_name="python3")
    try:
        reply = kc.kernel_info(reply=True, timeout=60)
        return km.kernel_spec.display_name, reply["content"]["language_info"]
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def test_opening_a_workspace_notebook_changes_nothing_and_does_not_count_as_an_edit(course, tmp_path):
    """JupyterLab writes the kernel's kernelspec display name and language_info into a notebook
    when its kernel starts; where they differ from the file, the notebook shows as modified on
    open and autosave rewrites it. The workspace writes what the kernel reports; and a notebook
    only opened and saved (any metadata, JupyterLab's JSON layout) is still replaced by an update."""
    _write(course / CHAPTER, _chapter_with_c(["<!-- c-prelude: rknn_context ctx = 0; -->"]))
    ws = tmp_path / "ws"
    _sync(course, ws)
    display_name, language_info = _kernel_info_language_info()
    meta = json.loads((ws / CHAPTER).read_text())["metadata"]
    assert meta["kernelspec"] == {"display_name": display_name, "language": "python", "name": "python3"}
    assert meta["language_info"] == language_info
    # opened and saved by a JupyterLab of another Python: its metadata, sources as lists of lines
    opened = json.loads((ws / CHAPTER).read_text())
    opened["metadata"]["language_info"]["version"] = "3.9.2"
    opened["metadata"]["kernelspec"]["display_name"] = "Python 3 (ipykernel) on the board"
    for cell in opened["cells"]:
        cell["source"] = "".join(cell["source"]).splitlines(keepends=True)
    (ws / CHAPTER).write_text(json.dumps(opened, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    rep, _ = _sync(course, ws)
    assert (rep.updated, rep.kept) == ([], []), "same cells: nothing to do"
    new = _chapter_with_c(["<!-- c-prelude: rknn_context ctx = 0; -->"])
    new.cells.append(nbformat.v4.new_markdown_cell("## A new section"))
    _write(course / CHAPTER, new)
    rep, out = _sync(course, ws)
    assert rep.updated == [CHAPTER] and rep.kept == [], out
    assert _sources(ws / CHAPTER)[-1] == "## A new section"
    assert not (ws / updated_name(CHAPTER)).exists()
