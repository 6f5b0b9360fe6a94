"""rknnlab.review.errors: one row per RKNN error code, the simulator's reproductions really
raise what the table shows, board-only rows say why; and the hints of rknnlab.rknn.errors."""
import re

import pytest

from rknnlab import models, review
from rknnlab.review import errors as review_errors
from rknnlab.rknn import abi, errors
from rknnlab.sim import ASSUMPTIONS

REPRODUCED = {-4, -5, -6, -7, -8, -9, -13}
BOARD_ONLY = {-1, -2, -3, -10, -11, -12}


@pytest.fixture(scope="module")
def table():
    return review.error_codes()


def _stable(message: str) -> str:
    """A message without the parts that change from run to run (descriptor numbers)."""
    return re.sub(r"fd \d+", "fd N", message)


def test_every_code_has_one_row_in_order(table):
    assert [r.code for r in table.rows] == list(range(-1, -14, -1))
    assert [r.name for r in table.rows] == [abi.ERROR_NAMES[c] for c in range(-1, -14, -1)]
    assert all(r.meaning and r.trigger and r.check and r.reproduced and r.message for r in table.rows)


def test_the_simulator_reproduces_exactly_the_codes_it_can(table):
    assert {r.code for r in table.rows if r.reproduced_here} == REPRODUCED
    assert {r.code for r in table.rows if r.reproduced.startswith("board only: ")} == BOARD_ONLY


@pytest.mark.parametrize("code", sorted(REPRODUCED))
def test_each_message_in_the_table_is_really_raised(table, code):
    exc = review.reproduce_error(code)
    assert type(exc) is errors.ERROR_CLASSES[code] and exc.code == code
    assert _stable(str(exc)) == _stable(table.row(code).message)
    assert str(exc).startswith(f"{exc.function} returned {code} ({abi.ERROR_NAMES[code]})")


@pytest.mark.parametrize("code", sorted(BOARD_ONLY))
def test_board_only_codes_say_why_and_give_the_bindings_message(table, code):
    row = table.row(code)
    with pytest.raises(LookupError, match="board only") as caught:
        review.reproduce_error(code)
    assert row.reproduced.split("board only: ", 1)[1] in str(caught.value)
    function = review_errors._CODES[code].function
    assert row.message == f"[not reproduced] {errors.error_for(code, function)}"


def test_unknown_codes_are_refused():
    with pytest.raises(LookupError, match="not an RKNN error code"):
        review.reproduce_error(-14)
    with pytest.raises(LookupError):
        review.reproduce_error(0)


def test_triggers_name_their_evidence(table):
    assert "#554" in table.row(-1).trigger and "failed to submit" in table.row(-1).trigger
    assert "#44" in table.row(-4).trigger and "#218" in table.row(-4).trigger
    assert "#440" in table.row(-5).trigger
    five = table.row(-5).trigger
    assert "airockchip/rknn-toolkit2#558" in five and "airockchip/rknn_model_zoo#298" in five and "A64" in five
    eight = table.row(-8)
    assert "No public log" in eight.trigger and "A64" in eight.trigger and "A64" in eight.reproduced
    assert "size" not in eight.check  # a size problem is -5 now
    assert "failed to open rknn device" in table.row(-1).trigger and "#320" in table.row(-1).trigger
    assert "RKNPU1" in table.row(-3).trigger and "-1" in table.row(-3).trigger
    assert "timeout_ms" not in table.row(-2).trigger and "NULL" in table.row(-2).trigger
    assert "NULL (the binding names it -4)" in table.row(-4).reproduced
    assert "A63" in table.row(-13).trigger and "A63" in table.row(-7).trigger
    eleven = table.row(-11)
    assert "rknn_api.h only" in eleven.meaning and "does not list" in eleven.meaning


def test_meanings_are_paraphrased_not_copied(table):
    copied = ("execution error", "parameter error", "memory allocation is failed", "object is invalid",
              "version does not match", "is unavailable")
    for row in table.rows:
        assert not any(phrase in row.meaning.lower() for phrase in copied), row.meaning


def test_every_row_says_what_to_check(table):
    places = ("RKNN_LOG_LEVEL", "dmesg", "doctor", "RKNN_QUERY", "return code", "message")
    for row in table.rows:
        assert any(place in row.check for place in places), row


def test_text_fits_15_lines_of_100_columns(table):
    lines = str(table).splitlines()
    assert len(lines) <= 15 and max(map(len, lines)) <= 100
    assert "simulated RK3588" in lines[0] and "7 of 13" in lines[0]
    assert ".row(" not in lines[0]        # plain words: chapter 7's prose says how to print one code
    assert all(str(code) in text for code, text in zip(range(-1, -14, -1), lines[2:]))
    # at least two spaces after each cell, so a reader (and chapter 7's test) can split the columns
    cells = re.findall(r"^(-\d+)\s+\S+\s+(board only|\S.*?)\s{2,}", str(table), flags=re.M)
    assert [int(code) for code, _ in cells] == list(range(-1, -14, -1))
    assert "…" not in "".join(call for _, call in cells)


def test_html_has_a_row_per_code(table):
    page = table._repr_html_()
    body = page.split("<tbody>", 1)[1]
    assert body.count("<tr>") == 13 and "simulated RK3588" in page


def test_row_show_and_frame(table):
    assert table.row(-8).code == -8
    with pytest.raises(KeyError):
        table.row(-20)
    text = table.show(columns=("code", "name", "message"))
    assert max(map(len, text.splitlines())) <= 100 and "[not reproduced]" in text
    assert repr(text) == str(text)  # shows as text in a notebook
    with pytest.raises(ValueError, match="unknown columns"):
        table.show(columns=("code", "colour"))
    frame = table.frame
    assert len(frame) == 13 and frame.attrs["source"] == table.source
    assert int(frame["reproduced_here"].sum()) == len(REPRODUCED)
    assert len(str(table.row(-5)).splitlines()) > 3


def test_another_soc_uses_its_own_builds():
    other = review.error_codes("rk3568")
    assert "simulated RK3568" in other.source
    assert other.row(-13).reproduced_here and "rk3588" in other.row(-13).message


def test_a_simulator_passed_in_is_used_and_left_open():
    from rknnlab.sim import SimRuntime
    rt = SimRuntime("rk3568")
    try:
        table = review.error_codes(rt=rt)
        assert table.source == rt.source and "RK3568" in table.source
        assert review.reproduce_error(-7, rt=rt).code == -7
        ctx = rt.init(str(models.model_path("digits_cnn", "rk3568")))
        rt.destroy(ctx)  # still open: the table did not close the caller's runtime
    finally:
        rt.close()


def test_a_boards_runtime_only_lends_its_soc():
    """The triggers (ctx 0, 1 PiB of memory) never run on a board: a native runtime only
    says which SoC to simulate."""
    class Board:  # what error_codes reads of a board's runtime: its backend and SoC
        backend, soc = "native", "rk3568"

        def __getattr__(self, name):
            raise AssertionError(f"error_codes called {name} on the board")

    table = review.error_codes(rt=Board())
    assert "simulated RK3568" in table.source and len(table.rows) == 13


def test_assumption_a63_is_listed_with_a_board_check():
    by_key = {key: (text, check) for key, text, check in ASSUMPTIONS}
    text, check = by_key["A63"]
    assert "RKNN_ERR_TARGET_PLATFORM_UNMATCH" in text and "rockchip-linux/rknpu2#25" in text
    assert "RKNN_ERR_CTX_INVALID" in text and "rknn_init" in check


# --------------------------------------------------------------------------- the hints
@pytest.mark.parametrize("code", sorted(errors.ERROR_CLASSES))
def test_each_hint_says_where_to_look(code):
    hint = errors.ERROR_CLASSES[code].hint
    assert any(place in hint for place in ("RKNN_LOG_LEVEL", "dmesg", "doctor", "RKNN_QUERY", "return code"))


def test_hints_for_device_and_memory_codes_name_the_kernel_log():
    for code in (-1, -2, -3, -4, -10):
        assert "dmesg" in errors.ERROR_CLASSES[code].hint, code
    assert "failed to submit" in errors.ERROR_CLASSES[-1].hint
    assert "size_with_stride" in errors.ERROR_CLASSES[-1].hint
    assert "ulimit -n" in errors.ERROR_CLASSES[-4].hint
    assert "rknn_api.h only" in errors.ERROR_CLASSES[-11].hint
    assert "ERROR_NOT_SUPPORTED" in errors.ERROR_CLASSES[-12].hint


def test_hints_follow_the_public_logs():
    """-2: the application cannot set the limit (rknn_run's extend is unused); -1: the two causes of
    'failed to submit' (User Guide §10.9), threads, and 'failed to open rknn device'; -3 logs are
    RKNPU1's; a too-small input is -5, not -8."""
    timeout = errors.ERROR_CLASSES[-2].hint
    assert "timeout_ms" not in timeout and "pass NULL" in timeout and "cannot raise the limit" in timeout
    fail = errors.ERROR_CLASSES[-1].hint
    for words in ("§10.9", "later layer", "#320", "#531", "failed to open rknn device"):
        assert words in fail, words
    assert "RKNPU1" in errors.ERROR_CLASSES[-3].hint
    param = errors.ERROR_CLASSES[-5].hint
    assert "rknn_inputs_set" in param and "FLOAT32" in param and "type and layout" in param
    assert "size" not in errors.ERROR_CLASSES[-8].hint.split("(")[0]


def test_assumption_a64_is_listed_with_a_board_check():
    by_key = {key: (text, check) for key, text, check in ASSUMPTIONS}
    text, check = by_key["A64"]
    assert "RKNN_ERR_PARAM_INVALID" in text and "airockchip/rknn-toolkit2#558" in text
    assert "RKNN_ERR_INPUT_INVALID" in text and "no public log" in text
    assert "rknn_inputs_set" in check and "63" in check and "256" in check
