"""book.toml: parsing, validation and its clear errors (needs only tomllib/tomli)."""
from __future__ import annotations

from pathlib import Path

import pytest

from rknnlab.book.config import BookConfigError, load_book, parse_book

REPO = Path(__file__).resolve().parents[1]
FIXTURE = Path(__file__).resolve().parent / "fixtures" / "book"


def minimal(**over):
    data = {
        "book": {"title": "T", "authors": ["A"], "licence": "CC0-1.0", "languages": ["en", "zh"]},
        "parts": [{"title": "P", "chapters": [{"title": "C", "file": "chapters/c.ipynb"}]}],
    }
    for k, v in over.items():
        data[k] = v
    return data


def error(data) -> str:
    with pytest.raises(BookConfigError) as e:
        parse_book(data, "book.toml")
    return str(e.value)


def test_repo_book_toml_has_the_full_course_map():
    cfg = load_book(REPO / "book.toml")
    assert cfg.languages[0] == "en" and "zh" in cfg.languages
    chapters = [e for e in cfg.entries() if e.kind == "chapter"]
    assert [e.file for e in chapters] == [
        "chapters/00_setup.ipynb", "chapters/01_memory_layers.ipynb", "chapters/02_lifecycle.ipynb",
        "chapters/03_bottlenecks.ipynb", "chapters/04_output_reuse.ipynb",
        "chapters/05_allocation.ipynb", "chapters/06_video_pipeline.ipynb",
        "chapters/07_misconceptions.ipynb", "chapters/cheatsheet.ipynb", "chapters/glossary.ipynb"]
    labs = [e.file for e in cfg.entries() if e.kind == "lab"]
    assert len(labs) == 7 and "labs/lab04_output_reuse.ipynb" in labs
    # an entry marked ready must exist (the build refuses a missing one); the others may not
    for e in cfg.entries():
        if e.status == "ready":
            assert (REPO / e.file).is_file(), f"{e.file} is marked ready but does not exist"


def test_fixture_book_toc_order_and_statuses():
    cfg = load_book(FIXTURE / "book.toml")
    assert [(e.kind, e.file, e.status) for e in cfg.entries()] == [
        ("chapter", "chapters/01_figure.ipynb", "ready"),
        ("lab", "labs/lab01_exercise.ipynb", "ready"),
        ("chapter", "chapters/03_planned.ipynb", "planned"),
        ("chapter", "chapters/04_draft.ipynb", "draft"),
    ]
    assert cfg.title_in("zh") == "测试书" and cfg.title_in("en") == "Fixture book"
    assert cfg.build.backend == "sim" and cfg.build.edition == "student"
    assert cfg.root == FIXTURE.resolve()


def test_defaults_and_translation_paths():
    cfg = parse_book(minimal(), "book.toml")
    assert (cfg.build.backend, cfg.build.edition, cfg.build.timeout, cfg.build.missing_translation) == (
        "auto", "student", 600, "fallback")
    e = next(cfg.entries())
    assert e.docname == "chapters/c"
    assert e.translation_file("en", "en") == "chapters/c.ipynb"
    assert e.translation_file("zh", "en") == "chapters/zh/c.ipynb"
    data = minimal()
    data["parts"][0]["chapters"][0]["translations"] = {"zh": "zh/c.ipynb"}
    assert next(parse_book(data).entries()).translation_file("zh", "en") == "zh/c.ipynb"


def test_title_per_language_falls_back():
    data = minimal()
    data["book"]["title"] = {"en": "Memory", "zh": "内存"}
    cfg = parse_book(data)
    assert cfg.title_in("zh") == "内存" and cfg.title_in("fr") == "Memory"


@pytest.mark.parametrize("mutate, words", [
    (lambda d: d["book"].update(tilte="x"), ["[book]", "unknown key 'tilte'"]),
    (lambda d: d["parts"][0]["chapters"][0].update(stauts="planned"), ["chapter #1", "'C'", "stauts"]),
    (lambda d: d["parts"][0]["chapters"][0].update(status="done"), ["status", "ready, draft, planned"]),
    (lambda d: d.update(build={"edition": "teacher"}), ["[build] edition", "student, instructor"]),
    (lambda d: d.update(build={"backend": "npu"}), ["[build] backend", "auto, sim, native"]),
    (lambda d: d.update(build={"timeout": 0}), ["[build] timeout"]),
    (lambda d: d["book"].pop("authors"), ["[book] authors"]),
    (lambda d: d["book"].pop("licence"), ["[book] licence"]),
    (lambda d: d.pop("parts"), ["no parts"]),
    (lambda d: d["parts"][0].update(chapters=[]), ["'P'", "no chapters"]),
    (lambda d: d["parts"][0]["chapters"][0].pop("file"), ["file is required"]),
    (lambda d: d["parts"][0]["chapters"][0].update(file="c.md"), [".ipynb"]),
    (lambda d: d["parts"][0]["chapters"][0].update(file="../c.ipynb"), ["inside the book"]),
    (lambda d: d["parts"][0]["chapters"][0].update(translations={"fr": "fr/c.ipynb"}), ["'fr'", "languages"]),
    (lambda d: d["parts"][0]["chapters"].append({"title": "D", "file": "chapters/c.ipynb"}),
     ["chapter #2", "already listed"]),
    (lambda d: d["parts"][0]["chapters"][0].update(labs=[{"title": "L"}]), ["lab #1", "file is required"]),
])
def test_schema_errors_say_where_and_what(mutate, words):
    data = minimal()
    mutate(data)
    msg = error(data)
    assert msg.startswith("book.toml: ")
    for w in words:
        assert w in msg, (w, msg)


def test_invalid_toml_and_missing_file(tmp_path):
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "book.toml").write_text("[book\ntitle = 1\n")
    with pytest.raises(BookConfigError, match="not valid TOML"):
        load_book(tmp_path / "bad")
    with pytest.raises(BookConfigError, match="no such file"):
        load_book(tmp_path / "none" / "book.toml")
    (tmp_path / "empty").mkdir()
    with pytest.raises(BookConfigError, match="no book.toml in"):
        load_book(tmp_path / "empty")
