"""rknnlab.i18n (the language the checks and figures speak) and rknnlab.fonts (a CJK font for
the figures): the choice by explicit setting, environment, JupyterLab's notebook path and the
working directory; the checks' own words in Chinese; Chinese figure text drawn with no missing
glyph."""
from __future__ import annotations

import os
import warnings

import pytest

from rknnlab import i18n
from rknnlab.checks._core import CheckResult, Lab, Summary, exercise_title


@pytest.fixture(autouse=True)
def clean_language(monkeypatch):
    monkeypatch.delenv(i18n.ENV, raising=False)
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    i18n.set_language(None)
    yield
    i18n.set_language(None)


def test_english_by_default(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert i18n.language() == "en"
    assert i18n.pick("memory", "内存") == "memory"


def test_a_notebook_in_a_zh_folder_speaks_chinese(tmp_path, monkeypatch):
    (tmp_path / "chapters" / "zh").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "chapters" / "zh")          # nbclient: the notebook's folder
    assert i18n.language() == "zh"
    monkeypatch.chdir(tmp_path / "chapters")
    assert i18n.language() == "en"
    # JupyterLab names the notebook; its folder decides, whatever the working directory
    monkeypatch.setenv("JPY_SESSION_NAME", str(tmp_path / "labs" / "zh" / "lab01_memory_layers.ipynb"))
    assert i18n.language() == "zh"
    monkeypatch.setenv("JPY_SESSION_NAME", "/home/zh/course/labs/lab01_memory_layers.ipynb")
    assert i18n.language() == "en", "only the notebook's own folder counts, not a 'zh' higher up"


def test_the_environment_and_an_explicit_choice_win(tmp_path, monkeypatch):
    (tmp_path / "zh").mkdir()
    monkeypatch.chdir(tmp_path / "zh")
    monkeypatch.setenv(i18n.ENV, "en")
    assert i18n.language() == "en"
    monkeypatch.setenv(i18n.ENV, "zh_CN")
    assert i18n.language() == "zh"
    i18n.set_language("en")
    assert i18n.language() == "en"
    i18n.set_language(None)
    assert i18n.language() == "zh"


def test_an_unknown_language_is_refused_by_name(monkeypatch):
    with pytest.raises(ValueError, match="'fr' is not a language"):
        i18n.set_language("fr")
    monkeypatch.setenv(i18n.ENV, "klingon")
    with pytest.raises(ValueError, match="RKNNLAB_LANG"):
        i18n.language()


def test_a_check_result_and_the_summary_speak_the_language():
    lab = Lab("Lab 98", ["Exercise 1 — the sizes", "Exercise 2 — the order"],
              zh=("实验 98", ["练习 1 — 大小", "练习 2 — 顺序"]))
    passed = CheckResult("Exercise 1 — the sizes", "passed", "内存大小正确。")
    not_done = CheckResult("Exercise 2 — the order", "not done", "尚未完成。", hint="先填写函数。")
    summary = Summary(lab.title, {"Exercise 1 — the sizes": passed, "Exercise 2 — the order": not_done})
    i18n.set_language("en")
    assert passed.headline == "PASSED  Exercise 1 — the sizes"
    assert "Hint: 先填写函数。" in repr(not_done)
    assert repr(summary).startswith("Lab 98: 1 of 2 checks passed")
    i18n.set_language("zh")
    assert passed.headline == "通过  练习 1 — 大小"
    assert not_done.headline == "未通过  练习 2 — 顺序：尚未完成"
    assert "提示：先填写函数。" in repr(not_done) and "提示：" in not_done._repr_html_()
    text = repr(summary)
    assert text.startswith("实验 98：2 项检查通过了 1 项") and "练习 2 — 顺序" in text
    assert "结果" in summary._repr_html_() and "Exercise" not in summary._repr_html_()
    assert exercise_title("Exercise 9 — unregistered") == "Exercise 9 — unregistered"


def test_zh_titles_must_match_the_exercises():
    with pytest.raises(ValueError, match="1 Chinese titles for 2 exercises"):
        Lab("Lab 97", ["Exercise 1 — a", "Exercise 2 — b"], zh=("实验 97", ["练习 1 — a"]))


# --------------------------------------------------------------------------- the font
def _needs_a_cjk_font():
    from rknnlab import fonts
    if fonts.cjk_family() is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must have a CJK font (.ci/run installs fonts-noto-cjk): {fonts.INSTALL_HINT}")
        pytest.skip(f"no CJK font on this machine ({fonts.INSTALL_HINT})")


def test_chinese_figure_text_has_no_missing_glyph():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from rknnlab import fonts
    _needs_a_cjk_font()
    saved = matplotlib.rcParams["font.family"]
    try:
        fig, ax = plt.subplots()
        ax.set_title("内存 零拷贝 句柄 上下文 量化 (MiB)")
        with warnings.catch_warnings(record=True) as before:
            warnings.simplefilter("always")
            fig.savefig(os.devnull, format="png")
        assert any("Glyph" in str(w.message) for w in before), "DejaVu Sans alone must lack these glyphs"
        plt.close(fig)
        family = fonts.use_cjk()
        assert family in fonts.CJK_FAMILIES
        assert matplotlib.rcParams["font.family"][-1] == family
        fig, ax = plt.subplots()        # text takes its font when it is made (matplotlib 3.9)
        ax.set_title("内存 零拷贝 句柄 上下文 量化 (MiB)")
        with warnings.catch_warnings(record=True) as after:
            warnings.simplefilter("always")
            fig.savefig(os.devnull, format="png")
        assert not [str(w.message) for w in after if "Glyph" in str(w.message)]
        plt.close(fig)
    finally:
        matplotlib.rcParams["font.family"] = saved


def test_without_a_cjk_font_use_cjk_warns_once_with_the_install_command(monkeypatch):
    from rknnlab import fonts
    monkeypatch.setattr(fonts, "cjk_family", lambda: None)
    monkeypatch.setattr(fonts, "_warned", False)
    with pytest.warns(UserWarning, match="fonts-noto-cjk"):
        assert fonts.use_cjk() is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert fonts.use_cjk() is None
