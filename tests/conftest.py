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
