"""The Chinese edition built and read: ``python -m rknnlab book build --lang zh``.

The zh book is built in the instructor edition, on the simulator: every zh notebook executes
once (in its own folder, so rknnlab speaks Chinese), the labs with their solutions. Then:

- no ready notebook falls back to English (only the drafts do), and every page is in Chinese;
- every check in every zh lab PASSED, and says so in Chinese (通过), with no English verdict;
- no output warns of a missing glyph (a figure's Chinese text drawn with no font for it);
- in headless Chromium, every page loads offline with every internal link and anchor
  resolving, and the Chinese text of the pages is drawn by a CJK font (Chrome's own account
  of the fonts it used: CSS.getPlatformFontsForNode), glyph for glyph: no empty boxes.
  A screenshot of a chapter goes to tests/_artifacts/zh-chapter04.png.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import bookhelpers as bh
import notebook_runs
from test_book_browser import _check_pages, _load, _serve, browser  # noqa: F401  (a fixture)

pytestmark = pytest.mark.timeout(1200)

CJK = re.compile(r"[\u4e00-\u9fff]")
STAGE = bh.ROOT / "_build" / "stage" / "zh-instructor"


@pytest.fixture(scope="module")
def zh_book():
    bh.book_needs()
    import nbformat
    from rknnlab.book.build import build_book
    from rknnlab.book.config import load_book
    from rknnlab.book.editions import apply_edition
    from rknnlab.book.execute import Job, execute_all, resolve_backend
    cfg = load_book(bh.ROOT / "book.toml")
    # the zh notebooks run once in this session (a cached run of an earlier session may come
    # from other code), several at once; the build then takes them from the cache
    jobs = []
    for e in cfg.entries():
        src = bh.ROOT / e.translation_file("zh", cfg.default_language)
        if e.status == "ready" and src.is_file():
            nb = apply_edition(nbformat.read(str(src), as_version=4), "instructor", "zh")
            jobs.append(Job(e.docname, nb, src.parent, src.relative_to(bh.ROOT).as_posix()))
    ex = execute_all(jobs, bh.ROOT / "_build" / ".jupyter_cache" / "sim", resolve_backend("sim"),
                     timeout=notebook_runs.TIMEOUT, log=lambda s: None,
                     executed_since=notebook_runs.SESSION_STARTED)
    assert not ex.errors, "\n\n".join(ex.errors)
    rep = build_book(bh.ROOT / "book.toml", lang="zh", edition="instructor", backend="sim",
                     log=lambda s: None)
    return cfg, rep


def _staged(docname: str) -> dict:
    return json.loads((STAGE / (docname + ".ipynb")).read_text(encoding="utf-8"))


def _outputs_text(nb: dict) -> str:
    parts = []
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            parts.append("".join(out.get("text", "")))
            for key in ("text/plain", "text/html"):
                parts.append("".join(out.get("data", {}).get(key, "")))
    return "\n".join(parts)


def test_no_ready_notebook_falls_back_to_english(zh_book):
    cfg, rep = zh_book
    ready = {e.docname for e in cfg.entries() if e.status == "ready"}
    assert rep.out_dir.name == "html-zh-instructor"
    assert not set(rep.fallbacks) & ready, f"ready notebooks shown in English: {set(rep.fallbacks) & ready}"
    for docname in ready:
        page = (rep.out_dir / (docname + ".html")).read_text(encoding="utf-8")
        assert '<html lang="zh' in page or "lang=\"zh_CN\"" in page or 'lang="zh-CN"' in page
        assert len(CJK.findall(page)) > 200, f"{docname}: hardly any Chinese on the page"


def test_every_zh_lab_check_passes_and_says_so_in_chinese(zh_book):
    cfg, _ = zh_book
    labs = [e for e in cfg.entries() if e.kind == "lab" and e.status == "ready"]
    assert labs
    for lab in labs:
        text = _outputs_text(_staged(lab.docname))
        summary = re.search(r"(实验 \d+)：(\d+) 项检查通过了 (\d+) 项", text)
        assert summary, f"{lab.docname}: no summary in Chinese"
        assert summary.group(2) == summary.group(3), f"{lab.docname}: {summary.group(0)}"
        assert "通过" in text and "未通过" not in text and "尚未完成" not in text, lab.docname
        assert not re.search(r"\b(NOT )?PASSED\b|Hint:", text), f"{lab.docname}: an English verdict"


def test_no_figure_misses_a_glyph(zh_book):
    cfg, rep = zh_book
    for e in cfg.entries():
        if e.status == "ready":
            text = _outputs_text(_staged(e.docname))
            assert "missing from font" not in text and "Glyph" not in text, e.docname


@pytest.fixture(scope="module")
def zh_site(zh_book):
    _, rep = zh_book
    server, base = _serve(rep.out_dir)
    yield rep, base
    server.shutdown()
    server.server_close()


def test_the_zh_book_offline_links_and_anchors(browser, zh_site):  # noqa: F811
    rep, base = zh_site
    _, problems, links = _check_pages(browser, rep.out_dir, base, STAGE, student=False)
    assert any("%E" in href for _, href in links), "no link to a Chinese anchor was followed"
    assert not problems, "\n".join(problems)


def _cjk_fonts_draw_every_glyph(browser, selector: str):
    """[(text, CJK characters, glyphs drawn by CJK fonts, fonts)] for the rendered elements
    matched (the first 40)."""
    browser.execute_cdp_cmd("DOM.enable", {})
    browser.execute_cdp_cmd("CSS.enable", {})
    root = browser.execute_cdp_cmd("DOM.getDocument", {"depth": 0})["root"]["nodeId"]
    ids = browser.execute_cdp_cmd("DOM.querySelectorAll", {"nodeId": root, "selector": selector})["nodeIds"]
    rows = []
    for node in ids[:40]:
        text = browser.execute_cdp_cmd("DOM.getOuterHTML", {"nodeId": node})["outerHTML"]
        text = re.sub(r"<[^>]+>", "", text)
        n = len(CJK.findall(text))
        if not n:
            continue
        fonts = browser.execute_cdp_cmd("CSS.getPlatformFontsForNode", {"nodeId": node})["fonts"]
        if not fonts:       # not rendered (a folded box): nothing is drawn, so nothing to judge
            continue
        drawn = sum(f["glyphCount"] for f in fonts if "CJK" in f["familyName"] or "Hei" in f["familyName"]
                    or "Han" in f["familyName"] or "YaHei" in f["familyName"])
        rows.append((text[:40], n, drawn, [f["familyName"] for f in fonts]))
    return rows


def test_chinese_text_is_drawn_by_a_cjk_font(browser, zh_site):  # noqa: F811
    rep, base = zh_site
    for page in ("chapters/04_output_reuse.html", "labs/lab02_lifecycle.html", "index.html"):
        browser.set_window_size(1400, 1700)
        _load(browser, base + page)
        rows = _cjk_fonts_draw_every_glyph(browser, "article h1, article h2, article p, article li")
        assert rows, f"{page}: no Chinese text found"
        for text, n, drawn, fonts in rows:
            assert drawn >= n, f"{page}: {text!r}: {n} Chinese characters, {drawn} drawn by a CJK font ({fonts})"
    bh.ARTIFACTS.mkdir(parents=True, exist_ok=True)
    _load(browser, base + "chapters/04_output_reuse.html")
    assert browser.save_screenshot(str(bh.ARTIFACTS / "zh-chapter04.png"))


def test_searching_the_zh_book_for_a_chinese_term_finds_its_pages(browser, zh_site):  # noqa: F811
    """Sphinx indexes Chinese words (split by jieba, which knows the terms the pages define:
    the build gives it them) and its search page loads its stemmer."""
    import time
    from urllib.parse import quote
    rep, base = zh_site
    _load(browser, base + "search.html?q=" + quote("零拷贝"))   # jieba alone cuts it in two
    found = []
    for _ in range(100):
        found = browser.execute_script(
            "return Array.from(document.querySelectorAll('#search-results li a')).map(a => a.href)")
        if found:
            break
        time.sleep(0.1)
    assert any("07_misconceptions.html" in h or "06_video_pipeline.html" in h for h in found), found
