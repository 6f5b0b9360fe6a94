"""The labs graded by nbgrader itself: ``python -m rknnlab nbgrader export``, then nbgrader's
own commands on the course directory it writes.

- the export: every ready lab, solution cells as nbgrader solution cells, each check an
  autograded test cell with the points its lab module declares, everything else locked;
  labs/ unchanged; an existing source notebook is not overwritten without --force; a lab
  whose checks and points disagree is refused, with nothing written;
- ``nbgrader generate_assignment`` for every lab: the release is the lab's student edition
  (plus the grading note), no solution left in it;
- ``nbgrader autograde`` on lab 1 (the lab that runs fastest): a submission made from the
  instructor edition gets full marks, one made from the student edition zero, a correct
  answer written otherwise than the reference gets its exercise's points and no more; seven
  planted cheats get nothing: a cell that reassigns a check, a cell that makes
  ``CheckResult.require`` always pass, an answer cell that reassigns its check, a cell that
  writes into the lab's results, outputs copied from a graded notebook, a graded cell
  edited, a module named rknnlab handed in beside the notebook. Three of them do earn points
  under nbgrader's stock Execute (checked): the grader, not luck, stops them. An answer that
  reads what a check expects from the check's frame is flagged in autograde's log;
- ``nbgrader generate_feedback``: the checks' own messages are in the feedback;
- ``--lang zh``: the Chinese labs, graded the same, their feedback in Chinese.
"""
from __future__ import annotations

import copy
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytest.importorskip("nbgrader", reason="nbgrader is in the classroom extra: pip install -e '.[dev]'")
import nbformat  # noqa: E402

from rknnlab.book.editions import student_copy  # noqa: E402
from rknnlab.classroom import nbgrader_export as nx  # noqa: E402
from rknnlab.classroom.nbgrader_autograde import graded_call  # noqa: E402
from rknnlab.workspace import for_jupyterlab  # noqa: E402

pytestmark = pytest.mark.timeout(600)

NBGRADER = [sys.executable, "-m", "nbgrader"]
LAB = "lab01"
LAB_FILE = "lab01_memory_layers.ipynb"
TOTAL = 24          # lab 1's POINTS, summed: what full marks are


def _env() -> dict:
    # nbgrader runs `alembic` (its database's migrations) from PATH: this Python's scripts. No
    # PYTHONPATH: rknnlab is installed (pip install -e), as on an instructor's machine, where a
    # kernel looks in the notebook's own folder first
    scripts = str(Path(sys.executable).parent)
    env = dict(os.environ, RKNNLAB_BACKEND="sim", PATH=scripts + os.pathsep + os.environ.get("PATH", ""))
    env.pop("PYTHONPATH", None)
    return env


def _nbgrader(course: Path, *args: str) -> subprocess.CompletedProcess:
    env = _env()
    done = subprocess.run([*NBGRADER, *args], cwd=course, env=env, capture_output=True, text=True,
                          timeout=500)
    assert done.returncode == 0, f"nbgrader {' '.join(args)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def _digest(folder: Path) -> dict:
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


# ------------------------------------------------------------------ the export, every lab
@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    labs_before = _digest(ROOT / "labs")
    course = tmp_path_factory.mktemp("nbgrader") / "course"
    done = subprocess.run([sys.executable, "-m", "rknnlab", "nbgrader", "export", "--out", str(course)],
                          capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT / "lib")))
    assert done.returncode == 0, done.stderr
    return course, done.stdout, labs_before


def test_the_export_writes_every_ready_lab_and_leaves_labs_alone(exported):
    course, printed, labs_before = exported
    assert _digest(ROOT / "labs") == labs_before
    ready = [p.name for p in nx.ready_labs(ROOT)]
    assert len(ready) >= 6
    written = sorted(p.name for p in (course / "source").glob("*/*.ipynb"))
    assert written == sorted(ready)
    assert (course / "nbgrader_config.py").is_file()
    assert course.stat().st_mode & 0o077 == 0, "the solutions and the class's grades are the instructor's only"
    assert "GradeInFreshKernel" in (course / "nbgrader_config.py").read_text()
    for name in ready:
        assert name in printed


def test_every_check_is_a_graded_cell_with_its_declared_points(exported):
    from importlib import import_module
    course, _, _ = exported
    for path in sorted((course / "source").glob("*/*.ipynb")):
        lab = path.parent.name
        points = import_module(f"rknnlab.checks.{lab}").POINTS
        nb = nbformat.read(str(path), as_version=4)
        graded = {}
        for cell in nb.cells:
            meta = cell.metadata["nbgrader"]           # every cell is nbgrader's
            assert meta["schema_version"] == 3 and meta["grade_id"]
            if meta["grade"]:
                call = graded_call(cell.source)
                assert call is not None, f"{path.name}: graded cell {cell.source!r} is not a check"
                assert meta["locked"] and not meta["solution"]
                graded[call[0]] = meta["points"]
            elif meta["solution"]:
                assert not meta["locked"]
                assert cell.source.count(nx.BEGIN) == 1 and cell.source.count(nx.END) == 1
                assert cell.source.index(nx.BEGIN) > 0, "the stub comes first"
            else:
                assert meta["locked"], f"{path.name}: an unmarked cell is editable"
            assert "solution" not in cell.metadata.get("tags", [])
        assert graded == points, path.name
        assert len({c.metadata["nbgrader"]["grade_id"] for c in nb.cells}) == len(nb.cells)


def test_an_existing_source_is_kept_without_force(exported, tmp_path):
    course, _, _ = exported
    mine = tmp_path / "course"
    shutil.copytree(course, mine)
    edited = mine / "source" / LAB / LAB_FILE
    edited.write_text(edited.read_text().replace("How this lab is graded", "How I grade it"))
    before = _digest(mine)
    with pytest.raises(FileExistsError, match=LAB_FILE):
        nx.export(mine)
    assert _digest(mine) == before, "nothing may be written when the export is refused"
    nx.export(mine, force=True)
    assert "How this lab is graded" in edited.read_text()


def test_a_lab_whose_checks_and_points_disagree_is_refused(tmp_path):
    nb = nbformat.read(str(ROOT / "labs" / LAB_FILE), as_version=4)
    nb.cells = [c for c in nb.cells if "checks.check_plan(" not in c.source]
    broken = tmp_path / LAB_FILE
    nbformat.write(nb, str(broken))
    out = tmp_path / "course"
    with pytest.raises(nx.ExportError, match="check_plan"):
        nx.export(out, labs=[broken])
    assert not out.exists()


def test_graded_call_reads_only_our_graded_cells():
    assert graded_call("checks.check_plan(a, b, c).require()") == ("check_plan", "a, b, c")
    assert graded_call("checks.check_x(f, k=2).require()") == ("check_x", "f, k=2")
    for other in ("checks.check_plan(a)", "print(1)\nchecks.check_plan(a).require()",
                  "x.check_plan(a).require()", "checks.summary().require()", "checks.check_plan(a).require(1)",
                  "checks.check_plan(a", ""):
        assert graded_call(other) is None, other


# ------------------------------------------------------------ generate_assignment, every lab
@pytest.fixture(scope="module")
def released(exported):
    course, _, _ = exported
    _nbgrader(course, "generate_assignment", LAB, "--force")    # the command, as an instructor types it
    # the other labs through nbgrader's API, in one process (the same converter, no start-up each)
    others = [p.parent.name for p in sorted((course / "source").glob("*/*.ipynb")) if p.parent.name != LAB]
    script = ("import sys\nfrom nbgrader.apps import NbGraderAPI\nfrom traitlets.config import Config\n"
              "from traitlets.config.loader import PyFileConfigLoader\n"
              "cfg = PyFileConfigLoader('nbgrader_config.py', path='.').load_config()\n"
              "cfg.CourseDirectory.root = '.'\napi = NbGraderAPI(config=cfg)\n"
              "for lab in sys.argv[1:]:\n    r = api.generate_assignment(lab, force=True)\n"
              "    assert r['success'], r\n")
    done = subprocess.run([sys.executable, "-c", script, *others], cwd=course, capture_output=True, text=True,
                          env=_env(), timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return course


def test_the_release_is_the_student_edition_and_holds_no_solution(released):
    for lab_path in nx.ready_labs(ROOT):
        nb = nbformat.read(str(lab_path), as_version=4)
        assignment = nx.lab_module_of(nb).rsplit(".", 1)[1]
        release = nbformat.read(str(released / "release" / assignment / lab_path.name), as_version=4)
        student = for_jupyterlab(student_copy(nb))
        got = [c for c in release.cells if c.metadata["nbgrader"]["grade_id"] != f"{assignment}-grading"]
        assert [c.id for c in got] == [c.id for c in student.cells], lab_path.name
        for mine, theirs in zip(got, student.cells):
            expected = theirs.source.rstrip()
            if mine.metadata["nbgrader"]["grade"]:
                expected += ".require()"
            assert mine.source.rstrip() == expected, f"{lab_path.name} cell {mine.id}"
            assert nx.BEGIN not in mine.source
        solutions = [c.source for c in nb.cells if "solution" in c.metadata.get("tags", [])]
        text = "\n".join(c.source for c in release.cells)
        elsewhere = "\n".join(c.source for c in student.cells)
        own = [ln for sol in solutions for ln in sol.splitlines() if ln.strip() and ln not in elsewhere]
        assert len(own) > 10
        assert not [ln for ln in own if ln in text], f"{lab_path.name}: a solution line is in the release"


# --------------------------------------------------------------------- autograde, lab 1
def _answer(nb, stub_id: str, source: str) -> None:
    cell = next(c for c in nb.cells if c.metadata["nbgrader"]["grade_id"] == f"{LAB}-answer-{stub_id}")
    cell.source = source


def _add_before(nb, check: str, source: str) -> None:
    i = next(i for i, c in enumerate(nb.cells) if c.metadata["nbgrader"]["grade_id"] == f"{LAB}-{check}")
    nb.cells.insert(i, nbformat.v4.new_code_cell(source))


ALTERNATIVE_EX2 = {        # exercise 2 answered otherwise than the reference, and right
    "f2df31af": ("import math\n"
                 "C2 = {'rk3568': 8}                     # int8 channels per group; 16 on the others\n"
                 "predicted = {s: math.ceil(255 / C2.get(s, 16)) * C2.get(s, 16) * 40 * 40 for s in (SOC, OTHER)}\n"),
    "ed8aa508": ("import math\n\n"
                 "def predict_sizes(attr):\n"
                 "    dims = [attr.dims[i] for i in range(attr.n_dims)]\n"
                 "    nbytes = np.dtype(abi.TYPE_TO_NUMPY[attr.type]).itemsize\n"
                 "    size = nbytes * math.prod(dims)\n"
                 "    if (attr.fmt, len(dims)) in ((abi.RKNN_TENSOR_NHWC, 4), (abi.RKNN_TENSOR_NC1HWC2, 5)):\n"
                 "        padded = list(dims)\n"
                 "        padded[-2] = max(attr.w_stride, dims[-2])     # W: the next-to-last axis in both\n"
                 "        return size, nbytes * math.prod(padded)\n"
                 "    return size, size\n"),
}
ALTERNATIVE_POINTS = 4      # lab 1's POINTS["check_size_prediction"]

PASSING = 'checks.CheckResult("Exercise 1 — the fields of rknn_mem_size", "passed", "ok")'


def _submissions(course: Path) -> dict:
    """{student: notebook} for lab 1, each made from the instructor's source or the release."""
    source = nbformat.read(str(course / "source" / LAB / LAB_FILE), as_version=4)
    release = nbformat.read(str(course / "release" / LAB / LAB_FILE), as_version=4)
    subs = {"teacher": source, "blank": copy.deepcopy(release)}

    alt = copy.deepcopy(release)
    for stub_id, src in ALTERNATIVE_EX2.items():
        _answer(alt, stub_id, src)
    subs["alternative"] = alt

    cheat = copy.deepcopy(release)
    _add_before(cheat, "check_mem_size", f"checks.check_mem_size = lambda *args: {PASSING}")
    subs["reassigns_check"] = cheat

    cheat = copy.deepcopy(release)
    _add_before(cheat, "check_mem_size", "from rknnlab.checks import CheckResult\n"
                                         "CheckResult.require = lambda self: self")
    subs["patches_require"] = cheat

    cheat = copy.deepcopy(release)
    stub = next(c for c in cheat.cells if c.metadata["nbgrader"]["grade_id"] == f"{LAB}-answer-8feeebfb")
    _answer(cheat, "8feeebfb", stub.source + f"\nchecks.check_mem_size = lambda *args: {PASSING}\n")
    subs["answer_reassigns"] = cheat

    cheat = copy.deepcopy(release)
    _add_before(cheat, "check_mem_size",
                "everything = {ex: checks.CheckResult(ex, 'passed', 'ok') for ex in checks._LAB.exercises}\n"
                "checks.results = lambda: dict(everything)\n"
                "checks._LAB.read = lambda *a: dict(everything)\n"
                "checks.summary = lambda: 'Lab 1: 5 of 5 checks passed'")
    subs["writes_results"] = cheat

    cheat = copy.deepcopy(release)
    cheat.metadata["copied_from"] = "teacher"       # outputs copied in by the fixture, after teacher's run
    subs["copies_outputs"] = cheat

    cheat = copy.deepcopy(release)
    for cell in cheat.cells:
        if cell.metadata["nbgrader"]["grade"]:
            cell.source = 'print("PASSED")'
    subs["edits_graded_cells"] = cheat

    subs["ships_a_module"] = copy.deepcopy(release)      # with FAKE_RKNNLAB beside it (_write)

    cheat = copy.deepcopy(release)                       # reads what the check expects from its frame
    _answer(cheat, "ed8aa508", "import sys\n\ndef predict_sizes(attr):\n"
                               "    seen = sys._getframe(1).f_locals\n"
                               "    return seen.get('size'), seen.get('with_stride')\n")
    subs["reads_the_checks_frame"] = cheat
    return subs


#: handed in beside the notebook as rknnlab/__init__.py: it loads the real rknnlab, then makes
#: every check "pass" (where the notebook's own folder comes first on sys.path)
FAKE_RKNNLAB = """\
import importlib, os, sys
_here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _here]
del sys.modules[__name__]
importlib.import_module("rknnlab")
from rknnlab.checks import _core
_core.CheckResult.require = lambda self: self
import rknnlab.classroom.grading as _grading
_grading.grader = lambda module: (lambda name, *args: None)
"""


def _write(course: Path, student: str, nb) -> None:
    folder = course / "submitted" / student / LAB
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(folder / LAB_FILE))
    (folder / "timestamp.txt").write_text("2026-12-02 09:00:00.000000 UTC")
    if student == "ships_a_module":
        (folder / "rknnlab").mkdir(exist_ok=True)
        (folder / "rknnlab" / "__init__.py").write_text(FAKE_RKNNLAB)


def _scores(course: Path) -> dict:
    from nbgrader.api import Gradebook
    out = {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for sub in gb.assignment_submissions(LAB):
            grades = {g.name: g.auto_score for nb in sub.notebooks for g in nb.grades}
            out[sub.student_id] = (sub.score, grades)
    return out


@pytest.fixture(scope="module")
def graded(released, tmp_path_factory):
    course = released
    subs = _submissions(course)
    _write(course, "teacher", subs.pop("teacher"))
    _nbgrader(course, "autograde", LAB, "--student", "teacher", "--force")
    # outputs of a graded notebook, cell for cell, in a student edition
    teacher = nbformat.read(str(course / "autograded" / "teacher" / LAB / LAB_FILE), as_version=4)
    outputs = {c.id: c.get("outputs", []) for c in teacher.cells if c.cell_type == "code"}
    copied = subs["copies_outputs"]
    for cell in copied.cells:
        if cell.cell_type == "code":
            cell.outputs = copy.deepcopy(outputs.get(cell.id, []))
            cell.execution_count = 1
    assert any("PASSED" in json.dumps(c.outputs) for c in copied.cells if c.cell_type == "code")
    for student, nb in subs.items():
        _write(course, student, nb)
    done = _nbgrader(course, "autograde", LAB)   # the others (teacher's is done: nbgrader skips it)
    log = done.stdout + done.stderr
    _nbgrader(course, "generate_feedback", LAB, "--force")

    # the same two cheats under nbgrader's stock autograde (its own Execute): they must work
    # there, or their zero above would prove nothing
    stock = tmp_path_factory.mktemp("stock") / "course"
    shutil.copytree(course / "source", stock / "source")
    config = (course / "nbgrader_config.py").read_text()
    assert "c.Autograde.autograde_preprocessors" in config
    (stock / "nbgrader_config.py").write_text(config.split("# Autograde runs")[0])
    _nbgrader(stock, "generate_assignment", LAB, "--force")
    for student in STOCK_CHEATS:
        src = course / "submitted" / student / LAB
        shutil.copytree(src, stock / "submitted" / student / LAB)
    _nbgrader(stock, "autograde", LAB, "--force")
    return _scores(course), _scores(stock), course, log


#: cheats that do earn points under nbgrader's stock Execute (without rknnlab's grader)
STOCK_CHEATS = ("reassigns_check", "patches_require", "ships_a_module")


def test_the_instructor_edition_gets_full_marks(graded):
    scores, _, _, _ = graded
    total, grades = scores["teacher"]
    assert total == TOTAL, grades
    assert len(grades) == 5


def test_the_student_edition_gets_zero(graded):
    scores, _, _, _ = graded
    total, grades = scores["blank"]
    assert total == 0, grades
    assert len(grades) == 5


def test_a_correct_answer_written_otherwise_gets_its_points_and_no_more(graded):
    scores, _, _, _ = graded
    total, grades = scores["alternative"]
    assert grades[f"{LAB}-check_size_prediction"] == ALTERNATIVE_POINTS, grades
    assert total == ALTERNATIVE_POINTS, grades


@pytest.mark.parametrize("cheat", ["reassigns_check", "patches_require", "answer_reassigns", "writes_results",
                                   "copies_outputs", "edits_graded_cells", "ships_a_module"])
def test_a_planted_cheat_earns_nothing(graded, cheat):
    scores, _, _, _ = graded
    total, grades = scores[cheat]
    assert total == 0, (cheat, grades)


def test_the_cheats_do_earn_points_under_nbgraders_stock_execute(graded):
    _, stock, _, _ = graded
    assert stock["reassigns_check"][1][f"{LAB}-check_mem_size"] > 0, stock["reassigns_check"]
    assert stock["patches_require"][0] == TOTAL, stock["patches_require"]
    assert stock["ships_a_module"][0] == TOTAL, stock["ships_a_module"]


def test_an_answer_that_reads_the_checks_frame_is_flagged_for_the_instructor(graded):
    # it may earn points (a check calls it from a frame holding what it expects): the
    # instructor is told to read it; an honest notebook is not flagged
    _, _, _, log = graded
    warnings = [ln for ln in log.splitlines() if "an answer cell uses" in ln]
    assert len(warnings) == 1 and "_getframe" in warnings[0] and "f_locals" in warnings[0], warnings


def test_the_feedback_holds_the_checks_messages(graded):
    _, _, course, _ = graded
    import html
    import re
    def text(student):
        page = (course / "feedback" / student / LAB / LAB_FILE.replace(".ipynb", ".html")).read_text()
        return html.unescape(re.sub(r"<[^>]+>", " ", page))
    blank = text("blank")
    for exercise in ("Exercise 1", "Exercise 2", "Exercise 3", "Exercise 4", "Exercise 5"):
        assert re.search(rf"NOT PASSED\s+{exercise}", blank), exercise
    assert "still raises NotImplementedError" in blank           # a check's own message
    assert "Hint:" in blank
    teacher = text("teacher")
    assert len(re.findall(r"(?<!NOT )PASSED\s+Exercise", teacher)) >= 5
    assert "NOT PASSED  Exercise" not in teacher
    cheat = text("reassigns_check")
    assert re.search(r"NOT PASSED\s+Exercise 1", cheat)


# ------------------------------------------------------------------ the Chinese labs
@pytest.fixture(scope="module")
def graded_zh(tmp_path_factory):
    course = tmp_path_factory.mktemp("nbgrader-zh") / "course"
    report = nx.export(course, lang="zh")
    assert [lab.path.parent.name for lab in report.labs][:1] == [LAB]
    _nbgrader(course, "generate_assignment", LAB, "--force")
    source = nbformat.read(str(course / "source" / LAB / LAB_FILE), as_version=4)
    release = nbformat.read(str(course / "release" / LAB / LAB_FILE), as_version=4)
    _write(course, "teacher", source)
    _write(course, "blank", release)
    _nbgrader(course, "autograde", LAB)
    _nbgrader(course, "generate_feedback", LAB, "--force")
    return course, release, _scores(course)


def test_the_chinese_labs_export_from_labs_zh_and_grade_the_same(graded_zh):
    course, release, scores = graded_zh
    assert scores["teacher"][0] == TOTAL and scores["blank"][0] == 0, scores
    zh = for_jupyterlab(student_copy(nbformat.read(str(ROOT / "labs" / "zh" / LAB_FILE), as_version=4)))
    ours = [c for c in release.cells if c.metadata["nbgrader"]["grade_id"] not in
            (f"{LAB}-grading", f"{LAB}-language")]
    assert [c.source.rstrip().removesuffix(".require()") for c in ours] == [c.source.rstrip() for c in zh.cells]
    assert "本实验如何评分" in release.cells[1].source


def test_the_chinese_feedback_speaks_chinese(graded_zh):
    import html
    import re
    course, _, _ = graded_zh
    page = (course / "feedback" / "blank" / LAB / LAB_FILE.replace(".ipynb", ".html")).read_text()
    text = html.unescape(re.sub(r"<[^>]+>", " ", page))
    assert len(re.findall(r"未通过\s+练习", text)) >= 5, text[:2000]
    assert "NOT PASSED" not in text and "Hint:" not in text
