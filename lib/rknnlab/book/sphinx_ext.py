"""A small Sphinx extension for the rknnlab book.

* ships the book's CSS (solution cells framed in red, the provenance note) and a no-op
  ``mathjax_path`` script, so no page ever loads MathJax from a CDN;
* registers the build's settings (edition, backend) as config values, so switching
  edition or backend makes Sphinx rewrite every page;
* fills in each page's build time in the provenance note (the staged notebooks hold a
  token, so an unchanged notebook stays byte-identical and is not re-read);
* marks the edition in every page's ``<body>`` class (``rknnlab-student`` /
  ``rknnlab-instructor``) for the CSS;
* folds MyST admonitions with ``:class: dropdown`` (answers to Predict questions, lab
  hints) into a closed ``<details>``, as jupyterlab-myst folds them in JupyterLab: the
  theme alone would show them open, the answer right under its question.
"""
from __future__ import annotations

import datetime as _dt
import html as _html
from pathlib import Path

from docutils import nodes
from sphinx.locale import admonitionlabels
from sphinx.transforms.post_transforms import SphinxPostTransform

from .editions import BUILD_TIME_TOKEN

STATIC = Path(__file__).resolve().parent / "static"


def _page_context(app, pagename, templatename, context, doctree):
    body = context.get("body")
    if body and BUILD_TIME_TOKEN in body:
        now = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        context["body"] = body.replace(BUILD_TIME_TOKEN, now)


class FoldDropdownAdmonitions(SphinxPostTransform):
    """``<details>`` with the admonition's title as ``<summary>``; the body stays
    ordinary docutils nodes, so it renders as it would in an open box."""
    default_priority = 200
    formats = ("html",)

    def run(self, **kwargs) -> None:
        for node in list(self.document.findall(nodes.Admonition)):
            if "dropdown" not in node["classes"]:
                continue
            body = list(node.children)
            if body and isinstance(body[0], nodes.title):
                title = body.pop(0).astext()
            else:
                title = admonitionlabels.get(node.tagname, node.tagname.capitalize())
            kinds = ["admonition"] if node.tagname == "admonition" else ["admonition", node.tagname]
            classes = " ".join(dict.fromkeys(kinds + node["classes"]))
            opening = (f'<details class="{_html.escape(classes)}">'
                       f'<summary class="admonition-title">{_html.escape(str(title))}</summary>')
            # not replace_self: it would copy the box's classes onto the first raw node,
            # which the HTML writer then wraps in a <div> of its own
            parent = node.parent
            at = parent.index(node)
            parent[at:at + 1] = [nodes.raw("", opening, format="html"), *body,
                                 nodes.raw("", "</details>", format="html")]


def _add_static(app):
    app.config.html_static_path.append(str(STATIC))


def _chinese_search_that_loads(app) -> None:
    """Sphinx 9.0's Chinese search language ships english-stemmer.js (which defines
    ``EnglishStemmer``) but names its stemmer ``ChineseStemmer`` in language_data.js: every
    page of a zh site then logs "ChineseStemmer is not defined" and search breaks.  Name the
    stemmer the file defines (a no-op with a Sphinx that names it right)."""
    from sphinx.search import zh
    lang = zh.SearchChinese
    if lang.js_stemmer_rawcode == "english-stemmer.js" and lang.language_name != "English":
        app.add_search_language(type("SearchChinese", (lang,), {"language_name": "English"}))


def setup(app):
    app.add_config_value("rknnlab_edition", "student", "html")
    app.add_config_value("rknnlab_backend", "sim", "env")
    app.add_config_value("rknnlab_backend_label", "", "env")
    app.connect("builder-inited", _add_static)
    app.add_css_file("rknnlab.css")
    app.connect("html-page-context", _page_context)
    app.add_post_transform(FoldDropdownAdmonitions)
    _chinese_search_that_loads(app)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
