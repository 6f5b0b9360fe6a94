"""The language rknnlab speaks to the reader: English, or Simplified Chinese (the zh edition).

The lab checks' messages and hints and the figures' titles and axis labels follow it; names
from the RKNN API, numbers and what the runtime prints stay as they are.  Which language, in
this order:

1. ``rknnlab.i18n.set_language("zh")`` (or ``"en"``) in the notebook: an explicit choice;
2. the environment variable ``RKNNLAB_LANG`` (``zh`` or ``en``);
3. the notebook's own folder: a notebook in ``chapters/zh/`` or ``labs/zh/`` speaks Chinese.
   JupyterLab tells the kernel the notebook's path (``JPY_SESSION_NAME``); a kernel started
   without it (nbclient, the book build) runs in the notebook's folder, so the working
   directory says it;
4. else English.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Dict, Iterator, Mapping, Optional

LANGUAGES = ("en", "zh")
ENV = "RKNNLAB_LANG"

_chosen: Optional[str] = None


def _check(lang: str, where: str) -> str:
    lang = lang.strip().lower().replace("_", "-")
    lang = {"zh-cn": "zh", "zh-hans": "zh", "cn": "zh", "chinese": "zh", "english": "en"}.get(lang, lang)
    if lang not in LANGUAGES:
        raise ValueError(f"{where}: {lang!r} is not a language rknnlab speaks; use one of {LANGUAGES}")
    return lang


def set_language(lang: Optional[str]) -> None:
    """Speak ``lang`` ("en" or "zh") from now on in this process; ``None`` goes back to
    choosing by the environment and the notebook's folder."""
    global _chosen
    _chosen = None if lang is None else _check(lang, "set_language")


def _in_zh_folder(notebook: str) -> bool:
    return Path(notebook).parent.name == "zh"


def language() -> str:
    """"en" or "zh" (see the module's docstring for how it is chosen)."""
    if _chosen is not None:
        return _chosen
    env = os.environ.get(ENV, "").strip()
    if env:
        return _check(env, ENV)
    session = os.environ.get("JPY_SESSION_NAME", "")
    if session:
        return "zh" if _in_zh_folder(session) else "en"
    try:
        cwd = Path.cwd()
    except OSError:       # the working directory was deleted
        return "en"
    return "zh" if cwd.name == "zh" else "en"


def pick(en: str, zh: str) -> str:
    """``zh`` when rknnlab speaks Chinese, else ``en``: the two texts of one message."""
    return zh if language() == "zh" else en


class Texts(Mapping):
    """A read-only ``{key: text}`` whose texts are said in the language rknnlab speaks when
    they are read (it can change after import): ``Texts({"A": lambda: pick("...", "...")})``.
    The keys stay as they are (a student's code uses them)."""

    def __init__(self, texts: Dict[str, Callable[[], str]]) -> None:
        self._texts = dict(texts)

    def __getitem__(self, key: str) -> str:
        return self._texts[key]()

    def __iter__(self) -> Iterator[str]:
        return iter(self._texts)

    def __len__(self) -> int:
        return len(self._texts)

    def __repr__(self) -> str:
        return repr(dict(self))
