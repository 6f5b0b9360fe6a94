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


def test_unknown_id_is_an_error() -> None:
    with pytest.raises(KeyError, match="A999"):
        assumptions_table(["A1", "A999"])
