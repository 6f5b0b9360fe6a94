"""``python -m rknnlab nbgrader export [--out DIR]``: the labs as an nbgrader course.

It writes ``DIR/nbgrader_config.py`` and ``DIR/source/<lab>/<lab file>.ipynb`` for every lab
that book.toml marks ready (labs/ itself is not changed). In each notebook:

* an exercise's stub cell and the solution cell under it become one nbgrader **solution
  cell**: the stub, then the solution between ``### BEGIN SOLUTION`` and
  ``### END SOLUTION``. ``nbgrader generate_assignment`` keeps the stub and removes the
  solution (the course's config sets the code stub nbgrader puts in its place to nothing),
  so the student's release is the lab's student edition;
* each check cell, ``checks.check_x(ARGS)``, becomes an **autograded test cell**,
  ``checks.check_x(ARGS).require()``, worth ``POINTS["check_x"]`` of the lab's check module
  (``rknnlab.checks.labNN``: the one place points are declared). ``require()`` raises when
  the check does not pass, so the cell earns nothing then;
* every other cell is **locked** (read-only), and a first cell says how the lab is graded.

Grading runs in ``nbgrader autograde`` with the step :mod:`.nbgrader_autograde` (the config
names it): the submission runs from the top in a fresh kernel, and each test cell calls a
grader made before the student's first cell (:mod:`.grading`).
"""
from __future__ import annotations

import argparse
import ast
import copy
import sys
from dataclasses import dataclass, field
from importlib import import_module
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import nbformat

from ..book.editions import SOLUTION_TAG, has_tag

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"

#: what the exported course's nbgrader_config.py says; {course} and {timeout} are filled in
CONFIG = '''\
# nbgrader's configuration for the labs of the RKNN memory course, written by
# `python -m rknnlab nbgrader export`. Edit the course id; keep the rest.
c = get_config()  # noqa: F821 (nbgrader defines it)

c.CourseDirectory.course_id = {course!r}

# A stub stays where a solution was removed: the cell shows the lab's own "your code
# here" stub, with nothing appended (nbgrader's default would add a raise).
c.ClearSolutions.code_stub = {{"python": ""}}

# Autograde runs each submission from the top in a fresh kernel, with rknnlab's grader
# made before the student's first cell (rknnlab.classroom.nbgrader_autograde): a graded
# cell is judged by the lab's check as it was before any student code ran.
from nbconvert.preprocessors import ClearMetadataPreprocessor  # noqa: E402
from nbgrader.preprocessors import (AssignLatePenalties, CheckCellMetadata,  # noqa: E402
                                    IgnorePattern, LimitOutput, SaveAutoGrades)
from rknnlab.classroom.nbgrader_autograde import GradeInFreshKernel  # noqa: E402

c.Autograde.autograde_preprocessors = [
    GradeInFreshKernel, IgnorePattern, ClearMetadataPreprocessor, LimitOutput,
    SaveAutoGrades, AssignLatePenalties, CheckCellMetadata,
]
# a lab's measuring cells run for up to a minute or two on the simulator
c.Execute.timeout = {timeout}
'''

HEADER = {
    "en": (
        "**How this lab is graded.** Write your answers in the cells that say *your code here*\n"
        "(they are the only cells you can edit). Each check cell is worth the points nbgrader shows\n"
        "beside it ({total} in all). Grading runs your notebook from the top in a fresh kernel and\n"
        "re-runs each check on your functions: what your own session printed does not count, and\n"
        "neither does a cell that changes a check or its results. Before you submit: *Kernel →\n"
        "Restart Kernel and Run All Cells*, and read every check's result.\n"),
    "zh": (
        "**本实验如何评分。** 请在写有“在这里写你的代码”的单元格中作答（只有这些单元格可以编辑）。"
        "每个检查单元格的分值见 nbgrader 在其旁边显示的分数（共 {total} 分）。评分时会在一个全新的内核中"
        "从头运行你的笔记本，并对你的函数重新运行每一项检查：你自己会话中打印的内容不计分，"
        "修改检查或其结果的单元格也不计分。提交之前：选择 *Kernel → Restart Kernel and Run All Cells*，"
        "并阅读每一项检查的结果。\n"),
}
#: the first code cell of a Chinese lab: the checks speak Chinese in any folder (nbgrader's
#: release/ and autograded/ folders are not named zh, which is how rknnlab tells otherwise)
ZH_CELL = "from rknnlab import i18n\ni18n.set_language(\"zh\")      # 检查的说明和提示用中文\n"


class ExportError(ValueError):
    """A lab that cannot be exported as it is (the message says which cell and why)."""


@dataclass
class ExportedLab:
    assignment: str                  # "lab04": the nbgrader assignment (a folder of source/)
    path: Path                       # the source notebook written
    points: Dict[str, int]           # check name -> points
    solution_cells: int
    locked_cells: int

    @property
    def total(self) -> int:
        return sum(self.points.values())


@dataclass
class ExportReport:
    course_dir: Path
    labs: List[ExportedLab] = field(default_factory=list)
    config_written: bool = False


def is_check(node: ast.AST) -> bool:
    """True for the expression ``checks.check_x(ARGS)``."""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name) and node.func.value.id == "checks"
            and node.func.attr.startswith("check_"))


def only_expression(source: str) -> Optional[ast.AST]:
    """The expression a cell holds when it is one expression alone; None otherwise."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.Expr):
        return None
    return tree.body[0].value


def check_call(source: str) -> Optional[ast.Call]:
    """The call of a check cell, ``checks.check_x(ARGS)`` alone; None for any other cell."""
    call = only_expression(source)
    return call if call is not None and is_check(call) else None


def lab_module_of(nb: nbformat.NotebookNode) -> str:
    """``rknnlab.checks.labNN``, from the lab's ``from rknnlab.checks import labNN as checks``."""
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        try:
            tree = ast.parse(cell.source)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "rknnlab.checks":
                for alias in node.names:
                    if alias.asname == "checks":
                        return f"rknnlab.checks.{alias.name}"
    raise ExportError("no `from rknnlab.checks import labNN as checks` in any code cell")


def _nbgrader(cell: nbformat.NotebookNode, grade_id: str, *, solution: bool = False,
              grade: bool = False, locked: bool = False, points: int = 0) -> None:
    meta = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": 3,
            "solution": solution, "task": False}
    if grade:
        meta["points"] = points
    cell.metadata["nbgrader"] = meta
    tags = [t for t in cell.metadata.get("tags", []) if t != SOLUTION_TAG]
    if tags:
        cell.metadata["tags"] = tags
    else:
        cell.metadata.pop("tags", None)


def source_notebook(nb: nbformat.NotebookNode, assignment: str,
                    points: Dict[str, int], lang: str = "en") -> nbformat.NotebookNode:
    """The nbgrader source version of lab notebook ``nb`` (a copy; see the module's doc),
    written in ``lang`` ("en" or "zh")."""
    from ..workspace import for_jupyterlab
    nb = copy.deepcopy(nb)
    cells = list(nb.cells)
    out: List[nbformat.NotebookNode] = []
    seen: Dict[str, int] = {}
    i = 0
    while i < len(cells):
        cell = cells[i]
        where = f"{assignment}: cell {i} ({cell.get('id', '?')})"
        if has_tag(cell, SOLUTION_TAG):
            raise ExportError(f"{where}: a solution cell must come right after its stub (a code cell)")
        after = cells[i + 1] if i + 1 < len(cells) else None
        if cell.cell_type == "code" and after is not None and has_tag(after, SOLUTION_TAG):
            if after.cell_type != "code":
                raise ExportError(f"{where}: its solution cell is not a code cell")
            if BEGIN in cell.source or BEGIN in after.source:
                raise ExportError(f"{where}: already holds {BEGIN!r}")
            cell.source = f"{cell.source.rstrip()}\n{BEGIN}\n{after.source.rstrip()}\n{END}"
            _nbgrader(cell, f"{assignment}-answer-{cell.id}", solution=True)
            cell.outputs, cell.execution_count = [], None
            out.append(cell)
            i += 2
            continue
        call = check_call(cell.source) if cell.cell_type == "code" else None
        if call is not None:
            name = call.func.attr
            if name not in points:
                raise ExportError(f"{where}: {name} has no points (add it to the lab module's POINTS)")
            if name in seen:
                raise ExportError(f"{where}: {name} is called by two check cells")
            seen[name] = i
            cell.source = f"{cell.source.rstrip()}.require()"
            _nbgrader(cell, f"{assignment}-{name}", grade=True, locked=True, points=points[name])
        else:
            _nbgrader(cell, f"{assignment}-cell-{cell.id}", locked=True)
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
        out.append(cell)
        i += 1
    missing = sorted(set(points) - set(seen))
    if missing:
        raise ExportError(f"{assignment}: POINTS names checks no cell calls: {', '.join(missing)}")
    header = nbformat.v4.new_markdown_cell(HEADER[lang].format(total=sum(points.values())))
    header.id = f"{assignment}-grading"
    _nbgrader(header, f"{assignment}-grading", locked=True)
    at = 1 if out and out[0].cell_type == "markdown" else 0
    out.insert(at, header)
    if lang == "zh":
        speak = nbformat.v4.new_code_cell(ZH_CELL)
        speak.id = f"{assignment}-language"
        _nbgrader(speak, f"{assignment}-language", locked=True)
        out.insert(at + 1, speak)
    nb.cells = out
    nb.metadata.pop("rknnlab", None)
    return for_jupyterlab(nb)


LANGUAGES = ("en", "zh")


def ready_labs(course: Path, lang: str = "en") -> List[Path]:
    """The lab notebooks book.toml marks ready, in course order, in ``lang`` (a lab not
    translated yet is an error: a class gets every lab in its language)."""
    from ..book.config import load_book
    cfg = load_book(course / "book.toml")
    labs = [course / e.translation_file(lang, cfg.default_language)
            for e in cfg.entries() if e.kind == "lab" and e.status == "ready"]
    missing = [p.relative_to(course).as_posix() for p in labs if not p.is_file()]
    if missing:
        raise ExportError(f"no {lang} edition of: {', '.join(missing)}")
    return labs


def export(out: Path, course: Optional[Path] = None, labs: Optional[Sequence[Path]] = None,
           force: bool = False, course_id: str = "rknn-memory", timeout: int = 600,
           lang: str = "en") -> ExportReport:
    """Write the nbgrader course directory ``out`` (see the module's doc) from the labs in
    ``lang``; a new ``out`` is made readable by its owner only. A source notebook that already exists is left alone unless ``force`` (an
    instructor may have edited it); so is an existing nbgrader_config.py. Nothing is
    written when any lab fails to export."""
    from ..paths import repo_root
    if lang not in LANGUAGES:
        raise ExportError(f"language {lang!r}: expected one of {', '.join(LANGUAGES)}")
    course = Path(course) if course else repo_root()
    labs = list(labs) if labs is not None else ready_labs(course, lang)
    prepared = []
    for path in labs:
        nb = nbformat.read(str(path), as_version=4)
        module = lab_module_of(nb)
        assignment = module.rsplit(".", 1)[1]
        points = dict(getattr(import_module(module), "POINTS", {}))
        if not points:
            raise ExportError(f"{path.name}: {module} declares no POINTS")
        source = source_notebook(nb, assignment, points, lang)
        target = out / "source" / assignment / path.name
        prepared.append((target, source, ExportedLab(
            assignment, target, points,
            sum(bool(c.metadata["nbgrader"]["solution"]) for c in source.cells),
            sum(bool(c.metadata["nbgrader"]["locked"]) for c in source.cells))))
    existing = [str(t) for t, _, _ in prepared if t.exists()]
    if existing and not force:
        raise FileExistsError("these source notebooks exist (an instructor may have edited them); "
                              "move them away or pass --force: " + ", ".join(existing))
    report = ExportReport(out)
    if not out.exists():
        # the solutions, and later every student's submission and grade: the instructor's only
        out.mkdir(parents=True)
        out.chmod(0o700)
    config = out / "nbgrader_config.py"
    if not config.exists():
        config.write_text(CONFIG.format(course=course_id, timeout=timeout), encoding="utf-8")
        report.config_written = True
    for target, source, lab in prepared:
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(source, str(target))
        report.labs.append(lab)
    return report


def main(args: argparse.Namespace) -> int:
    out = Path(args.out)
    try:
        report = export(out, force=args.force, course_id=args.course_id, lang=args.lang)
    except (ExportError, FileExistsError, nbformat.ValidationError) as e:
        print(f"nbgrader export failed (nothing written): {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"nbgrader export failed: {e}", file=sys.stderr)
        return 1
    for lab in report.labs:
        print(f"  source/{lab.assignment}/{lab.path.name}: {len(lab.points)} graded cells, "
              f"{lab.total} points, {lab.solution_cells} answer cells")
    print(("wrote " if report.config_written else "kept the existing ") + str(out / "nbgrader_config.py"))
    print(f"next: cd {out} && nbgrader generate_assignment lab01   (then release it to the class; "
          f"after the deadline: nbgrader autograde lab01, nbgrader generate_feedback lab01)")
    return 0

