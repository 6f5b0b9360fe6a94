"""The built book in headless Chromium with the network blocked: the fixture book (test
data: a figure, an exercise with a solution, search) and the real course book.

Every page loads with no failed request and no request leaving the machine, pages whose
notebook has a figure show it rendered, every internal link resolves, search finds a
page, and the student edition shows no solution cell. Screenshots of a chapter page go
to tests/_artifacts/ (book-chapter.png, course-chapter04.png).

Needs Debian's chromium and chromium-driver (/usr/bin/chromium, /usr/bin/chromedriver) and
selenium (the dev extra). Without them the test skips, saying so, except in CI (CI=true),
where it fails instead.
"""
from __future__ import annotations

import functools
import http.server
import json
import os
import shutil
import threading
import time
from pathlib import Path
from urllib.parse import unquote, urldefrag, urlparse
from urllib.request import urlopen

import pytest

import bookhelpers as bh
import notebook_runs

pytestmark = pytest.mark.timeout(900)

CHROMIUM = os.environ.get("RKNNLAB_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = os.environ.get("RKNNLAB_CHROMEDRIVER") or shutil.which("chromedriver") or "/usr/bin/chromedriver"
INSTALL_HINT = ("install Debian's browser and driver (apt-get install chromium chromium-driver) "
                "and selenium (pip install -e '.[dev]')")


def _missing():
    missing = []
    if not Path(CHROMIUM).is_file():
        missing.append(f"chromium ({CHROMIUM} not found)")
    if not Path(CHROMEDRIVER).is_file():
        missing.append(f"chromedriver ({CHROMEDRIVER} not found)")
    try:
        import selenium  # noqa: F401
    except ImportError:
        missing.append("the Python package selenium")
    return missing


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    missing = _missing()
    if missing:
        msg = f"browser test needs {', '.join(missing)}: {INSTALL_HINT}"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{msg} (CI=true: this test must run in CI, .ci/run installs them)")
        pytest.skip(msg)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-dev-shm-usage", "--window-size=1280,1400",
                # a Chinese page makes Chrome offer a translation, fetched from Google: not the site's request
                "--disable-features=Translate",
                f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}",
                # the network is blocked: every host name but the local server's fails to resolve
                "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=opts)
    driver.set_page_load_timeout(60)
    # a fresh profile opens Chrome's new tab page, whose own frames then fail to resolve (seen:
    # a failed Document request with no URL during the first page of a run): let it settle and
    # drop its log, so every request the tests see is the site's
    driver.get("about:blank")
    time.sleep(1.0)
    driver.get_log("performance")
    driver.get_log("browser")
    yield driver
    driver.quit()


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def site():
    bh.book_needs()
    rep = bh.build("student")
    handler = functools.partial(_Quiet, directory=str(rep.out_dir))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield rep, f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


def _network_events(driver):
    """(urls requested, failures) since the last call, from Chrome's performance log."""
    urls, failed, by_id = [], [], {}
    for entry in driver.get_log("performance"):
        msg = json.loads(entry["message"])["message"]
        method, params = msg.get("method"), msg.get("params", {})
        if method == "Network.requestWillBeSent":
            url = params["request"]["url"]
            by_id[params["requestId"]] = url
            urls.append(url)
        elif method == "Network.loadingFailed":
            if params.get("canceled"):
                continue
            failed.append(f"{by_id.get(params['requestId'], params['requestId'])}: {params.get('errorText')}")
        elif method == "Network.responseReceived":
            status = params["response"]["status"]
            if status >= 400:
                failed.append(f"{params['response']['url']}: HTTP {status}")
    return urls, failed


def _load(driver, url):
    driver.get(url)
    for _ in range(100):
        if driver.execute_script("return document.readyState") == "complete":
            break
        time.sleep(0.05)
    time.sleep(0.3)  # late requests (fonts, icons) start after the load event


def _has_figure(stage: Path, docname: str) -> bool:
    nb = stage / (docname + ".ipynb")
    if not nb.is_file():
        return False
    data = json.loads(nb.read_text(encoding="utf-8"))
    return any(k.startswith("image/") for c in data["cells"] for o in c.get("outputs", [])
               for k in o.get("data", {}))


def _check_pages(browser, root: Path, base: str, stage: Path, solution_text: str = "", student: bool = True):
    """Load every page of the site at ``base``: the problems found, and the internal links.
    ``student``: the site is the student edition (no solution may show)."""
    pages = sorted(p.relative_to(root).as_posix() for p in root.rglob("*.html")
                   if "_static" not in p.parts)
    browser.get_log("performance")
    problems, links = [], set()
    for page in pages:
        _load(browser, base + page)
        urls, failed = _network_events(browser)
        problems += [f"{page}: failed request {f}" for f in failed]
        problems += [f"{page}: request leaves the machine: {u}" for u in urls
                     if urlparse(u).scheme in ("http", "https", "ws", "wss")
                     and urlparse(u).hostname != "127.0.0.1"]
        for entry in browser.get_log("browser"):
            if entry.get("level") == "SEVERE":
                problems.append(f"{page}: console error: {entry.get('message')}")
        if _has_figure(stage, page[: -len(".html")]):
            n = browser.execute_script(
                "return Array.from(document.querySelectorAll('article img'))"
                ".filter(i => i.complete && i.naturalWidth > 0).length")
            if n < 1:
                problems.append(f"{page}: the notebook has a figure but no image is rendered")
        if student and browser.execute_script("return document.querySelectorAll('.tag_solution').length"):
            problems.append(f"{page}: the student edition shows a solution cell")
        if solution_text and solution_text in browser.page_source:
            problems.append(f"{page}: the student edition contains the solution's text")
        for href in browser.execute_script(
                "return Array.from(document.querySelectorAll('a[href]')).map(a => a.href)"):
            if href.startswith(base):
                links.add((page, href))
    # every internal link resolves: the file is served, and an anchor exists on its page
    from bs4 import BeautifulSoup
    ids = {}
    for page, href in sorted(links):
        target, raw = urldefrag(href)
        frag = unquote(raw)    # a Chinese heading's anchor comes percent-encoded
        try:
            with urlopen(target, timeout=10) as r:
                status = r.status
                body = r.read().decode("utf-8", "replace") if target.endswith(".html") or target.endswith("/") else ""
        except Exception as e:  # HTTPError, URLError
            problems.append(f"{page}: link {href} does not resolve ({e})")
            continue
        if status != 200:
            problems.append(f"{page}: link {href}: HTTP {status}")
        if frag and body:
            if target not in ids:
                ids[target] = {el.get("id") for el in BeautifulSoup(body, "html.parser").find_all(id=True)}
            if frag not in ids[target] and raw not in ids[target]:   # as browsers do: either form
                problems.append(f"{page}: link {href}: no element with id {frag!r}")
    return pages, problems, links


def test_the_book_in_headless_chromium_offline(browser, site):
    rep, base = site
    stage = bh.WORK / "_build" / "stage" / "en-student"
    pages, problems, links = _check_pages(browser, rep.out_dir, base, stage, "FIXTURE-SOLUTION-TEXT")
    assert "index.html" in pages and "chapters/01_figure.html" in pages
    assert not problems, "\n".join(problems)
    assert {(p, h) for p, h in links if h.startswith(base + "labs/")}, "the lab is linked"


def _serve(directory: Path):
    handler = functools.partial(_Quiet, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


@pytest.fixture(scope="module")
def course_site():
    """The real course book (student edition, simulator), built into the repository's _build/."""
    bh.book_needs()
    from rknnlab.book.build import build_book
    from rknnlab.book.config import load_book
    cfg = load_book(bh.ROOT / "book.toml")
    # the session's runs of the notebooks (tests/notebook_runs.py), several at once: then the
    # build executes none of them and the tests running beside it wait for no run of the build
    notebook_runs.execute_ahead([e.file for e in cfg.entries() if e.status == "ready"])
    rep = build_book(bh.ROOT / "book.toml", edition="student", backend="sim", log=lambda s: None)
    server, base = _serve(rep.out_dir)
    yield cfg, rep, base
    server.shutdown()
    server.server_close()


def test_the_course_book_in_headless_chromium_offline(browser, course_site):
    cfg, rep, base = course_site
    stage = bh.ROOT / "_build" / "stage" / "en-student"
    pages, problems, _ = _check_pages(browser, rep.out_dir, base, stage)
    for entry in cfg.entries():
        if entry.status == "ready":
            page = entry.docname + ".html"
            assert page in pages, f"{entry.file} is ready in book.toml but has no page"
    assert not problems, "\n".join(problems)
    # the lab's solutions exist in the source and are gone from the student pages
    lab = json.loads((bh.ROOT / "labs" / "lab04_output_reuse.ipynb").read_text())
    assert any("solution" in c.get("metadata", {}).get("tags", []) for c in lab["cells"])
    shot = bh.ARTIFACTS / "course-chapter04.png"
    bh.ARTIFACTS.mkdir(parents=True, exist_ok=True)
    browser.set_window_size(1400, 1700)
    _load(browser, base + "chapters/04_output_reuse.html")
    assert browser.save_screenshot(str(shot))
    # a widget shows no Python repr (VBox(children=(HBox(...): a note, then the run's figures
    browser.set_window_size(1400, 1400)
    _load(browser, base + "chapters/00_setup.html")
    outputs = browser.execute_script(
        "return Array.from(document.querySelectorAll('div.cell_output')).map(o => o.innerText).join('\\n')")
    assert "VBox(children=" not in outputs and "HBox(children=" not in outputs
    # in its place, a picture of the runner panel at the end of the build's run: the model
    # chosen, the iterations, a full progress bar
    panel = browser.execute_script("""
        const s = document.querySelector('.rknnlab-widget-snapshot'); if (!s) return null;
        s.scrollIntoView(); window.scrollBy(0, -80);
        const p = s.querySelector('progress');
        return {height: s.getBoundingClientRect().height, text: s.innerText,
                model: (s.querySelector('select option[selected]') || {}).textContent,
                done: p ? p.value === p.max && p.max > 0 : false,
                ticked: s.querySelectorAll('input[type=checkbox]:checked').length};""")
    assert panel and panel["height"] > 40, panel
    assert panel["model"] == "mobilenet_v2" and panel["done"] and panel["ticked"] >= 1, panel
    assert browser.save_screenshot(str(bh.ARTIFACTS / "course-chapter00-widget.png"))


def test_search_works_offline(browser, site):
    _, base = site
    _load(browser, base + "search.html?q=matplotlib")
    found = []
    for _ in range(100):
        found = browser.execute_script(
            "return Array.from(document.querySelectorAll('#search-results li a')).map(a => a.href)")
        if found:
            break
        time.sleep(0.1)
    assert any("chapters/01_figure.html" in h for h in found), found


def test_screenshot_of_a_chapter_page(browser, site):
    _, base = site
    browser.set_window_size(1280, 1700)  # tall enough for the title, the note and the figure
    _load(browser, base + "chapters/01_figure.html")
    bh.ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = bh.ARTIFACTS / "book-chapter.png"
    assert browser.save_screenshot(str(shot))
    assert shot.stat().st_size > 10_000


def _visible_search_boxes(browser) -> int:
    return browser.execute_script(
        "return Array.from(document.querySelectorAll('.search-button__button, input[type=search]'))"
        ".filter(e => { const r = e.getBoundingClientRect(); return r.width > 0 && r.height > 0; }).length")


def test_a_wide_text_column_and_one_search_box(browser, site):
    """At a 1400 px window the text column is ~1000-1100 px wide (code and wide tables need
    it; the theme's default is ~730), and each page has one search box."""
    _, base = site
    browser.set_window_size(1400, 1000)
    for page in ("index.html", "chapters/01_figure.html"):
        _load(browser, base + page)
        assert _visible_search_boxes(browser) == 1, page
    inner = browser.execute_script("return window.innerWidth")
    width = browser.execute_script("return document.querySelector('article p').getBoundingClientRect().width")
    assert inner >= 1380 and 950 <= width <= 1150, (inner, width)


def test_instructor_export_keeps_the_red_frame_round_solutions(browser, tmp_path, monkeypatch):
    """The single-file export, opened in the browser: JupyterLab's own cell style must not
    win over the solution frame."""
    bh.book_needs()
    from rknnlab.book.export import export_notebook
    # a copy of its own: the shared fixture's execution log and book cache belong to the
    # build tests, which count what was executed and what came from the cache
    root = tmp_path / "book"
    shutil.copytree(bh.FIXTURE, root)
    monkeypatch.setenv("FIXTURE_EXEC_LOG", str(tmp_path / "exec.log"))
    out = export_notebook(root / "labs" / "lab01_exercise.ipynb", edition="instructor", backend="sim",
                          out=tmp_path / "lab-instructor.html", log=lambda s: None)
    browser.set_window_size(1200, 900)
    _load(browser, out.as_uri())
    style = browser.execute_script(
        "const c = document.querySelector('.celltag_solution'); const s = getComputedStyle(c);"
        "return [s.borderLeftWidth, s.borderLeftStyle, s.borderLeftColor]")
    assert style == ["4px", "solid", "rgb(192, 57, 43)"], style
    bh.ARTIFACTS.mkdir(parents=True, exist_ok=True)
    assert browser.save_screenshot(str(bh.ARTIFACTS / "export-instructor.png"))


_ANSWER_SHOWN = (
    "const p = Array.from(document.querySelectorAll('p'))"
    ".find(e => e.textContent.includes(\"folded answer: nine\"));"
    "if (!p) return null;"
    # a closed <details> hides its content with content-visibility (the box may keep its size)
    "return p.checkVisibility();")


def _answer_hidden_until_clicked(browser, where: str):
    assert browser.execute_script(_ANSWER_SHOWN) is False, f"{where}: the answer shows before a click"
    browser.execute_script(
        "Array.from(document.querySelectorAll('summary'))"
        ".find(s => s.textContent.trim() === 'Answer').click()")
    assert browser.execute_script(_ANSWER_SHOWN) is True, f"{where}: a click does not open the answer"


def test_a_dropdown_answer_stays_hidden_until_clicked(browser, site, tmp_path, monkeypatch):
    """The fixture chapter's `:class: dropdown` Answer, in the book and in the export."""
    _, base = site
    browser.set_window_size(1280, 1400)
    _load(browser, base + "chapters/01_figure.html")
    _answer_hidden_until_clicked(browser, "book")
    from rknnlab.book.export import export_notebook
    root = tmp_path / "book"
    shutil.copytree(bh.FIXTURE, root)
    monkeypatch.setenv("FIXTURE_EXEC_LOG", str(tmp_path / "exec.log"))
    out = export_notebook(root / "chapters" / "01_figure.ipynb", backend="sim",
                          out=tmp_path / "chapter.html", log=lambda s: None)
    _load(browser, out.as_uri())
    _answer_hidden_until_clicked(browser, "export")
