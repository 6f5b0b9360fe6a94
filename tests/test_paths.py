"""rknnlab.paths: finding the repository and data/models."""
from __future__ import annotations

from pathlib import Path

import pytest

from rknnlab import paths

REPO = Path(__file__).resolve().parents[1]


def test_env_overrides(tmp_path, monkeypatch):
    (tmp_path / "models").mkdir()
    monkeypatch.setenv("RKNNLAB_DATA", str(tmp_path))
    assert paths.data_dir() == tmp_path.resolve()
    assert paths.models_dir() == tmp_path.resolve() / "models"


def test_env_pointing_nowhere(tmp_path, monkeypatch):
    monkeypatch.setenv("RKNNLAB_DATA", str(tmp_path / "nope"))
    with pytest.raises(paths.DataNotFoundError, match="RKNNLAB_DATA"):
        paths.data_dir()


def test_env_without_models(tmp_path, monkeypatch):
    monkeypatch.setenv("RKNNLAB_DATA", str(tmp_path))
    with pytest.raises(paths.DataNotFoundError, match="models"):
        paths.models_dir()


def test_found_from_the_checkout(monkeypatch):
    monkeypatch.delenv("RKNNLAB_DATA", raising=False)
    assert paths.repo_root() == REPO
    if (REPO / "data" / "models").is_dir():
        assert paths.models_dir() == REPO / "data" / "models"


def test_found_from_the_cwd(tmp_path, monkeypatch):
    (tmp_path / "data" / "models").mkdir(parents=True)
    (tmp_path / "labs").mkdir()
    monkeypatch.delenv("RKNNLAB_DATA", raising=False)
    monkeypatch.setattr(paths, "__file__", str(tmp_path.parent / "site-packages" / "rknnlab" / "paths.py"))
    monkeypatch.chdir(tmp_path / "labs")
    assert paths.repo_root() == tmp_path.resolve()
    assert paths.models_dir() == tmp_path.resolve() / "data" / "models"


def test_not_found_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.delenv("RKNNLAB_DATA", raising=False)
    monkeypatch.setattr(paths, "_search_starts", lambda: [tmp_path])
    with pytest.raises(paths.DataNotFoundError) as e:
        paths.models_dir()
    assert "RKNNLAB_DATA" in str(e.value) and "data/models" in str(e.value)
