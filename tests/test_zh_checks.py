"""The lab checks speak Chinese in the zh edition: a static reading of their source.

Every text a check module writes for the student (messages, details, hints, titles) is a pair
``L(english, chinese)`` (rknnlab.i18n.pick), so that both exist side by side in the source:

- any string literal with English words (three or more) outside a pair is a failure, unless it
  is a docstring, a regular expression, or its line ends with ``# en-only`` (code, C source,
  names a student types, the runtime's own words);
- in a pair, the Chinese text has Chinese characters and the English text has none, and both
  interpolate the same values (the same ``{...}`` expressions), so that no number is lost;
- each ``Lab(...)`` gives its Chinese titles (``zh=``).

A dynamic check of the same (messages produced in Chinese) is in the labs' own zh runs.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Iterator, List, Tuple

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHECKS = ROOT / "lib" / "rknnlab" / "checks"
CJK = re.compile(r"[\u4e00-\u9fff]")
#: the check modules of the ready labs (lab 7 is a draft: not translated yet)
MODULES = ["_core.py", "ch00.py"] + [f"lab0{n}.py" for n in range(1, 7)] + \
          [f"_lab0{n}_cases.py" for n in range(2, 7)]
REGEX_CALLS = {"compile", "search", "match", "fullmatch", "findall", "finditer", "sub", "split"}


def _words(text: str) -> int:
    """English words of prose: HTML tags, dotted names (rknnlab.sim) and identifiers
    (is_prealloc, RKNN_FLAG_X) do not count."""
    text = re.sub(r"<[^>]*>", " ", text)
    text = re.sub(r"[\w-]*[._][\w.-]*", " ", text)
    return len(re.findall(r"(?<![\w%{-])[A-Za-z]{2,}\b(?![-\w])", text))


def _text_of(node: ast.AST) -> str:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else " " for v in node.values)
    return ""


def _interpolated(node: ast.AST) -> List[str]:
    return sorted(ast.unparse(v.value) for v in ast.walk(node) if isinstance(v, ast.FormattedValue))


def _pair_call(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "L"


def _docstrings(tree: ast.AST) -> set:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            body = getattr(node, "body", [])
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def _strings_outside_pairs(tree: ast.AST) -> Iterator[ast.AST]:
    """String nodes not inside an L(...) call, a regex call, or an f-string (whose parts
    belong to the f-string)."""
    def visit(node: ast.AST, inside: bool) -> Iterator[ast.AST]:
        if _pair_call(node):
            return
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            if name in REGEX_CALLS and isinstance(f, ast.Attribute) and getattr(f.value, "id", "") == "re":
                return
        if isinstance(node, (ast.Constant, ast.JoinedStr)) and not inside:
            if _text_of(node):
                yield node
        for child in ast.iter_child_nodes(node):
            yield from visit(child, inside or isinstance(node, ast.JoinedStr))
    yield from visit(tree, False)


def _pairs(tree: ast.AST) -> Iterator[ast.Call]:
    return (n for n in ast.walk(tree) if _pair_call(n))


def _translated(source: str) -> bool:
    return "L(" in source and ("import pick as L" in source or "import L" in source or ", L," in source
                               or " L\n" in source or ", L\n" in source)


@pytest.mark.parametrize("module", MODULES)
def test_every_students_text_is_an_english_chinese_pair(module):
    source = (CHECKS / module).read_text(encoding="utf-8")
    if not _translated(source):
        pytest.skip(f"{module}: not translated yet")
    tree = ast.parse(source)
    lines = source.splitlines()
    docs = _docstrings(tree)
    bad = []
    for node in _strings_outside_pairs(tree):
        if id(node) in docs or _words(_text_of(node)) < 3:
            continue
        last = lines[(node.end_lineno or node.lineno) - 1]
        if "# en-only" in last or "# en-only" in lines[node.lineno - 1]:
            continue
        bad.append(f"line {node.lineno}: {_text_of(node)[:90]!r}")
    assert not bad, f"{module}: English text outside L(en, zh) ({len(bad)}):\n" + "\n".join(bad[:40])


@pytest.mark.parametrize("module", MODULES)
def test_pairs_have_chinese_and_the_same_values(module):
    source = (CHECKS / module).read_text(encoding="utf-8")
    if not _translated(source):
        pytest.skip(f"{module}: not translated yet")
    problems: List[Tuple[int, str]] = []
    for call in _pairs(ast.parse(source)):
        if len(call.args) != 2 or call.keywords:
            problems.append((call.lineno, "L takes two texts: L(english, chinese)"))
            continue
        en, zh = call.args
        en_text, zh_text = ast.unparse(en), ast.unparse(zh)
        if CJK.search(en_text):
            problems.append((call.lineno, "the English text has Chinese in it"))
        if _text_of(zh) and not CJK.search(zh_text) and _words(_text_of(zh)) >= 2:
            problems.append((call.lineno, f"the Chinese text has no Chinese: {zh_text[:60]}"))
        # every value the English shows, the Chinese shows (perhaps wrapped, e.g. lab_title(x));
        # an English-only choice of words ('was' if n == 1 else 'were') is not a value
        lost = [e for e in _interpolated(en)
                if "'" not in e and '"' not in e and not any(e in z for z in _interpolated(zh))]
        if lost:
            problems.append((call.lineno, f"the Chinese text does not show {lost}"))
    assert not problems, f"{module}:\n" + "\n".join(f"line {n}: {p}" for n, p in problems[:40])


@pytest.mark.parametrize("module", [m for m in MODULES if re.match(r"(ch|lab)\d\d\.py", m)])
def test_each_lab_gives_its_chinese_titles(module):
    source = (CHECKS / module).read_text(encoding="utf-8")
    if not _translated(source):
        pytest.skip(f"{module}: not translated yet")
    labs = [n for n in ast.walk(ast.parse(source))
            if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "Lab"]
    assert labs, f"{module} makes no Lab(...)"
    for call in labs:
        assert any(k.arg == "zh" for k in call.keywords) or len(call.args) == 3, \
            f"{module} line {call.lineno}: Lab(..., zh=(title, exercise titles))"
