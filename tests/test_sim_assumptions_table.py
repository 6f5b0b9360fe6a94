"""rknnlab.sim.assumptions_table: the one display of assumptions every chapter ends with."""
from __future__ import annotations

import pytest

from rknnlab.sim import ASSUMPTIONS, assumptions_table


def test_rows_in_the_order_asked_without_duplicates() -> None:
    first, last = ASSUMPTIONS[0][0], ASSUMPTIONS[-1][0]
    table = assumptions_table([last, first, last])
    assert [row[0] for row in table.rows] == [last, first]
    text = str(table).splitlines()
    assert len(text) == 3 and text[1].startswith(f"{last}: ")
    assert f"of the {len(ASSUMPTIONS)} in" in text[0]


def test_html_folds_the_board_check_under_each_line() -> None:
    key, assumption, check = ASSUMPTIONS[2]
    html = assumptions_table([key])._repr_html_()
    assert html.count("<details>") == 1 and "Board check" in html
    assert check.split()[0] in html


def test_html_folds_the_whole_list_under_one_line_that_counts_it() -> None:
    keys = [row[0] for row in ASSUMPTIONS[:3]]
    html = assumptions_table(keys)._repr_html_()
    outer = html.index("<details class='rknnlab-assumptions'>")
    assert outer < html.index("<details>"), "the per-assumption lines sit inside the one fold"
    first_summary = html[outer:html.index("</summary>", outer)]
    assert f"3 of the {len(ASSUMPTIONS)}" in first_summary
    assert html.count("</details>") == 4


def test_every_folded_line_draws_its_own_disclosure_marker() -> None:
    # JupyterLab's CSS sets list-style none on <summary>: the marker must come with the
    # output (tests/test_jupyterlab_browser.py measures it in a browser)
    html = assumptions_table([row[0] for row in ASSUMPTIONS[:2]])._repr_html_()
    summaries = html.split("<summary")[1:]
    assert len(summaries) == 3
    for s in summaries:
        style = s[:s.index(">")]
        assert "display:list-item" in style and "list-style:revert" in style


def test_unknown_id_is_an_error() -> None:
    with pytest.raises(KeyError, match="A999"):
        assumptions_table(["A1", "A999"])


def test_every_folded_line_says_in_its_text_that_it_opens() -> None:
    # an untrusted notebook (executed elsewhere, opened from disk) loses list-style to
    # JupyterLab's sanitizer: the cue must be text inside each <summary>, not a style
    html = assumptions_table([row[0] for row in ASSUMPTIONS[:2]])._repr_html_()
    summaries = [s[s.index(">") + 1:s.index("</summary>")] for s in html.split("<summary")[1:]]
    assert len(summaries) == 3
    assert "[click to open" in summaries[0]
    assert all("[click for the board check]" in s for s in summaries[1:])
