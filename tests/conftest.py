"""Shared pytest fixtures."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Dict, Tuple

import pytest

RKNN_DOUBLE_SOURCE = Path(__file__).resolve().parents[1] / "lib" / "rknnlab" / "c" / "rknn_double.c"


@pytest.fixture(scope="session")
def build_rknn_double(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Path]:
    """Compile lib/rknnlab/c/rknn_double.c (a C test double of
    librknnrt.so) into a .so; ``build_rknn_double("DOUBLE_OLD_RUNTIME")`` passes
    -D defines.  Each variant is built once per session, under its own name so
    that dlopen never confuses two variants.  Skips if gcc is missing."""
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc not found: the C test double of librknnrt.so cannot be built")
    out_dir = tmp_path_factory.mktemp("rknn_double")
    built: Dict[Tuple[str, ...], Path] = {}

    def build(*defines: str) -> Path:
        if defines not in built:
            library = out_dir / ("librknnrt_double" + "".join(f"_{d}" for d in defines) + ".so")
            subprocess.run([gcc, "-shared", "-fPIC", "-O1", "-Wall",
                            *(f"-D{d}" for d in defines), "-o", str(library),
                            str(RKNN_DOUBLE_SOURCE)], check=True)
            built[defines] = library
        return built[defines]

    return build


@pytest.fixture(scope="session")
def rknn_double_path(build_rknn_double: Callable[..., Path]) -> Path:
    """Path of the compiled C test double of librknnrt.so."""
    return build_rknn_double()


ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def kernel_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """A notebook kernel started by the test imports this checkout's rknnlab with this Python."""
    pytest.importorskip("ipykernel")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(ROOT / "lib")] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    monkeypatch.setenv("PATH", os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))


@pytest.fixture
def execute_notebook(kernel_env) -> Callable[..., float]:
    """execute_notebook(nb, path): run nb in path's folder (raises on a failing cell); seconds taken."""
    nbclient = pytest.importorskip("nbclient")

    def execute(nb, path: Path) -> float:
        client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                         resources={"metadata": {"path": str(path.parent)}})
        started = time.monotonic()
        client.execute()
        return time.monotonic() - started
    return execute


@pytest.fixture
def simulator(monkeypatch: pytest.MonkeyPatch) -> None:
    """The simulator at its default SoC, whatever the shell set (``pytestmark = pytest.mark.usefixtures("simulator")``)."""
    monkeypatch.setenv("RKNNLAB_BACKEND", "sim")
    monkeypatch.delenv("RKNNLAB_SIM_SOC", raising=False)


# --------------------------------------------------------------------------- parallel runs
# `make test` runs the suite in pytest-xdist's worker processes, a test file per worker at
# a time (--dist loadfile: a module's fixtures are built once). What must stay shared
# across them is shared through tests/session.py: each course notebook runs once per
# session (tests/notebook_runs.py). A test listed in ALONE measures time against a verdict
# or a budget that other processes' load would change (a faster/slower verdict, a sampler's
# rate, a budget of seconds): under xdist it runs while no other test runs; the other
# workers wait for it, and it waits for the tests they are running.
import session  # noqa: E402  (tests/ is on sys.path: pytest puts a conftest's folder there)

#: run alone: a test file, a test (file::name: every case of a parametrized test), one case
#: of a parametrized test, or a test name in any file
ALONE = (
    # a sampler's rate and wake-ups, against the slots of its clock
    "tests/test_probe.py",
    # rknn_run blocks for the modeled time; contexts on two cores overlap, on one they queue
    "tests/test_sim_timing.py",
    # the sampler's rate in a run, judged in full only when the run's CPU wait was low (the
    # module's first test makes that run)
    "tests/test_experiment.py::test_every_iteration_and_call_is_recorded",
    "tests/test_experiment.py::test_runtime_calls_poll_the_sampler",
    # twins "cannot tell apart", a planted sleep "slower" (skips when too disturbed)
    "tests/test_experiment_timing.py::test_real_runs_twins_cannot_be_told_apart_and_a_planted_sleep_is_slower",
    # lab checks that judge the student's timing against their own: the bottleneck phase
    # (lab 3 ex 1), want_float from a measured cost (lab 3 ex 4), cacheable (lab 5 ex 2)
    "tests/test_checks_lab03.py::test_ex1_right_rules_pass",
    "tests/test_checks_lab03.py::test_ex1_wrong_rules_fail",
    "tests/test_checks_lab03.py::test_ex4_right_rules_pass",
    "tests/test_checks_lab03.py::test_ex4_wrong_rules_fail",
    "tests/test_checks_lab03.py::test_ex4_a_missing_release_gets_the_pairing_note",
    "tests/test_checks_lab03.py::test_ex4_every_runtime_has_the_shape_it_stands_for",
    "tests/test_checks_lab05.py::test_ex2_right_rules_pass",
    "tests/test_checks_lab05.py::test_ex2_wrong_rules_fail",
    "tests/test_checks_lab05.py::test_ex2_patterns_go_both_ways_and_far_from_the_margin",
    # what the check says depends on whether the two threads overlapped in time
    "tests/test_checks_lab07_strategy.py::test_ex5_wrong_setups_fail[3-budget_share_everything-words0]",
    "tests/test_checks_lab07_strategy.py::test_ex5_wrong_setups_fail[11-budget_share_everything-words0]",
    "tests/test_checks_lab07_strategy.py::test_ex5_wrong_setups_fail[29-budget_share_everything-words0]",
    # every check PASSED within the lab's 60 s budget: the labs with the timing checks above,
    # and the two that take a third of the budget or more when alone
    "tests/test_checks.py::test_lab_instructor_edition_passes_every_check",
    "tests/test_checks_lab02.py::test_lab_instructor_edition_passes_every_check",
    "tests/test_checks_lab03.py::test_lab_instructor_edition_passes_every_check",
    "tests/test_checks_lab05.py::test_lab_instructor_edition_passes_every_check",
    # sleeps of the C test double, within a few milliseconds
    "tests/test_native_double.py::test_delays_make_the_named_calls_slower",
    "tests/test_c_examples.py::test_phases_puts_each_call_s_time_in_its_own_row",
    # a budget of seconds with little room
    "tests/test_review_alignment.py::test_rows_is_fast_and_labelled",
)

#: under xdist, these files are handed out first (the longest, measured, so that none is
#: left running alone at the end; the course book's first: it executes the notebooks that
#: the others read, several at once); the other files follow in their usual order.
#: test_pipeline_run.py before all: its heap test fails in a process that ran
#: test_plot_ch06.py and test_profile.py before it (96 B a frame in the post stage; to be
#: fixed in those tests or the library), so it goes to a fresh worker
FIRST = (
    "tests/test_pipeline_run.py", "tests/test_book_browser.py", "tests/test_zh_book.py", "tests/test_checks_lab02.py",
    "tests/test_checks_lab01.py", "tests/test_nbgrader.py",
    "tests/test_chapter06.py", "tests/test_checks_lab07_strategy.py", "tests/test_checks_lab03.py",
    "tests/test_checks_lab06.py", "tests/test_book_build.py", "tests/test_notebooks.py",
    "tests/test_checks_lab04.py", "tests/test_checks.py", "tests/test_jupyterlab_browser.py",
    "tests/test_chapter07.py", "tests/test_models.py", "tests/test_checks_lab05.py",
)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "alone: under pytest-xdist, run while no other test runs "
                                       "(a measurement of time that other processes' load would change)")
    if not hasattr(config, "workerinput"):      # the session's first process, before it starts workers
        session.begin()


def pytest_unconfigure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):
        session.end()


def _alone(nodeid: str) -> bool:
    test = nodeid.split("[", 1)[0]
    return (nodeid in ALONE or test in ALONE or nodeid.split("::", 1)[0] in ALONE
            or test.rsplit("::", 1)[-1] in ALONE)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items) -> None:
    for item in items:
        if _alone(item.nodeid):
            item.add_marker(pytest.mark.alone)
    # a test renamed or removed must not leave its entry behind, naming nothing
    files = {item.nodeid.split("::", 1)[0] for item in items}
    tests = {item.nodeid.split("[", 1)[0] for item in items} | {item.nodeid for item in items}
    for entry in ALONE:
        if "::" in entry and entry.split("::", 1)[0] in files and entry not in tests:
            config.issue_config_time_warning(pytest.PytestConfigWarning(
                f"tests/conftest.py ALONE names {entry}, which is not collected"), stacklevel=2)
    if hasattr(config, "workerinput"):     # every worker collects, and orders, the same way
        first = {path: rank for rank, path in enumerate(FIRST)}
        items.sort(key=lambda item: len(first) + 1 if _alone(item.nodeid)
                   else first.get(item.nodeid.split("::", 1)[0], len(first)))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """--dist loadfile, with the tests that run alone as one more unit (the last one handed
    out): one worker runs them one after the other, holding the lock (below) throughout, so
    the others wait once, not before each of them."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class Scheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return "the tests that run alone" if _alone(nodeid) else super()._split_scope(nodeid)

    return Scheduling(config, log)


_held = None   # (the "tests" lock, held exclusively?) between two tests that run alone


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem):
    """Under xdist, a test marked alone holds the session's "tests" lock exclusively (and
    keeps it for the next test if that one runs alone too), every other test holds it
    shared. Both queue at the "turnstile" first, so that a waiting alone test is not starved
    by the shared holders that keep coming."""
    global _held
    if not hasattr(item.config, "workerinput"):
        yield
        return
    alone = item.get_closest_marker("alone") is not None
    if _held is None:
        with session.lock("turnstile"):
            _held = (session.acquire("tests", shared=not alone), alone)
    try:
        yield
    finally:
        if not (alone and nextitem is not None and nextitem.get_closest_marker("alone") is not None):
            session.release(_held[0])
            _held = None
