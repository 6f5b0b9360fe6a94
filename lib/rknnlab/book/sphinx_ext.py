"""A small Sphinx extension for the rknnlab book.

* ships the book's CSS (solution cells framed in red, the provenance note) and a no-op
  ``mathjax_path`` script, so no page ever loads MathJax from a CDN;
* registers the build's settings (edition, backend) as config values, so switching
  edition or backend makes Sphinx rewrite every page;
* fills in each page's build time in the provenance note (the staged notebooks hold a
  token, so an unchanged notebook stays byte-identical and is not re-read);
* marks the edition in every page's ``<body>`` class (``rknnlab-student`` /
  ``rknnlab-instructor``) for the CSS.
"""
from __future__ import annotations

import datetime as _dt
from pathlib import Path

from .editions import BUILD_TIME_TOKEN

STATIC = Path(__file__).resolve().parent / "static"


def _page_context(app, pagename, templatename, context, doctree):
    body = context.get("body")
    if body and BUILD_TIME_TOKEN in body:
        now = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        context["body"] = body.replace(BUILD_TIME_TOKEN, now)


def _add_static(app):
    app.config.html_static_path.append(str(STATIC))


def setup(app):
    app.add_config_value("rknnlab_edition", "student", "html")
    app.add_config_value("rknnlab_backend", "sim", "env")
    app.add_config_value("rknnlab_backend_label", "", "env")
    app.connect("builder-inited", _add_static)
    app.add_css_file("rknnlab.css")
    app.connect("html-page-context", _page_context)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
