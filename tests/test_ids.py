"""One rule for every id a person or an address gives (``flowrunner.foundations.ids``): a
whole number from 1 to 2**63 - 1, else a sentence — 422 from the console and the API,
exit 2 and one line from the command line — and never an id the database overflows on.
On SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import room
import sqlalchemy as sa
from click.testing import CliRunner
from console import OPERATOR, Session, console, refusal, text
from hypothesis import given
from hypothesis import strategies as st

from flowrunner import errors, testing
from flowrunner.cli import cli
from flowrunner.foundations import ids

PAST = str(2**63)  # one past a 64-bit id
NINES = "9" * 20
RULE = "give a whole number from 1 to 9223372036854775807"


# -- the rule ------------------------------------------------------------------------------


@given(st.integers(min_value=1, max_value=ids.MAX_ID))
def test_every_id_reads_as_itself_given_as_a_number_or_its_digits(number: int) -> None:
    assert ids.read(number) == number
    assert ids.read(str(number)) == number
    assert ids.read(f" {number}\t") == number


@given(
    st.one_of(
        st.integers().filter(lambda n: not 1 <= n <= ids.MAX_ID),
        st.text(max_size=30).filter(lambda t: not t.strip().isascii() or not t.strip().isdigit()),
        st.sampled_from(["0", "00", "007", "+7", "-7", "7_0", "٧", "²", "7.0", "1e3", PAST]),
        st.booleans(),
        st.floats(),
        st.none(),
        st.just("9" * 10_000),
    )
)
def test_anything_else_is_refused_with_one_sentence(given_: object) -> None:
    with pytest.raises(ids.NotAnId) as refused:
        ids.read(given_, "run")
    said = str(refused.value)
    assert said.endswith(f"is not a run's id: {RULE}")
    assert "\n" not in said and len(said) < 200


# -- the console ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ui(module_engine: sa.Engine) -> Session:
    """The desk's console, built once per database: these tests are only refused."""
    return console(room.desk(module_engine), OPERATOR)


@pytest.mark.parametrize("value", [PAST, NINES, "0", "-1", "٣", "x"])
@pytest.mark.parametrize("path", ["/ops", "/ops/journal", "/ops/notices"])
def test_a_before_cursor_that_is_no_id_is_refused_with_its_sentence(
    ui: Session, path: str, value: str
) -> None:
    page = ui.get(path, before=value)
    assert page.status_code == 422, page.text
    assert f"is not a row's id: {RULE}" in text(page.text)


@pytest.mark.parametrize("value", [PAST, NINES, "0", "²"])
def test_a_flow_filter_past_any_id_is_a_name_no_flow_has(ui: Session, value: str) -> None:
    page = ui.get("/ops", flow=value)
    assert page.status_code == 422
    assert f"there is no flow '{value}'" in text(page.text)


@pytest.mark.parametrize("value", [PAST, NINES, "0", "-3", "abc", "%C2%B2"])
def test_ids_in_the_address_are_refused_with_a_sentence(ui: Session, value: str) -> None:
    run = ui.get(f"/run/{value}")
    assert run.status_code == 422
    assert f"a run's id is a whole number from 1 to {ids.MAX_ID}" in (refusal(run.text) or "")
    flow = ui.get(f"/flow/{value}")
    assert flow.status_code == 422
    assert (refusal(flow.text) or "").endswith(f"is not a flow's id: {RULE}")
    assert ui.post(f"/run/{value}/cancel").status_code == 422
    assert ui.post(f"/flow/1/step/{value}", {"title": "x"}).status_code in (404, 422)


def test_ids_that_fit_but_name_nothing_are_unknown(ui: Session) -> None:
    assert ui.get(f"/run/{ids.MAX_ID}").status_code == 404
    assert ui.get(f"/flow/{ids.MAX_ID}").status_code == 404
    assert ui.get("/ops", before=str(ids.MAX_ID)).status_code == 200


def test_a_bulk_selection_names_each_id_it_cannot_use(ui: Session) -> None:
    ui.get("/ops")
    page = ui.post("/ops/act", {"action": "cancel", "run": ["2", PAST, "abc", "0"]})
    assert page.status_code == 200
    said = text(page.text)
    for value in (PAST, "abc", "0"):
        assert f"there is no run '{value}'" in said


def test_the_runner_refuses_the_same_ids_the_same_way(any_engine: sa.Engine) -> None:
    desk: testing.FlowDriver = room.desk(any_engine)
    for call in (
        lambda: desk.runner.get_run(PAST),
        lambda: desk.runner.history(2**64),
        lambda: desk.runner.cancel("0", operator="olga"),
    ):
        with pytest.raises(errors.OperatorError) as refused:
            call()
        assert (refused.value.status_code, refused.value.code) == (422, "id_invalid")
    for lister in (desk.runner.list_runs, desk.runner.journal):
        with pytest.raises(errors.RowInvalid) as invalid:
            lister(before_id=NINES)
        assert [(e.field, e.code) for e in invalid.value.errors] == [("before_id", "id_invalid")]


# -- the command line ----------------------------------------------------------------------

APP = "fixtures.tickets.app:runner"


@pytest.fixture
def url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'desk.db'}"
    engine = sa.create_engine(url)
    room.desk(engine, start=datetime.now(UTC) - timedelta(days=4, hours=1))
    engine.dispose()
    return url


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["diagram", PAST], f"Error: there is no flow '{PAST}'"),
        (["runs", "list", "--flow", NINES], f"Error: flow: there is no flow '{NINES}'"),
        (["runs", "journal", "--before", PAST], f"'{PAST}' is not a row's id: {RULE}"),
        (["runs", "list", "--before", "0"], f"'0' is not a row's id: {RULE}"),
        (["runs", "notices", "--before", NINES], f"'{NINES}' is not a row's id: {RULE}"),
        (["runs", "show", PAST], f"Error: there is no run '{PAST}': a run's id is"),
        (["runs", "cancel", "2", NINES, "--operator", "o"], f"there is no run '{NINES}'"),
        (["runs", "journal", "--run", "-4"], "Error: there is no run '-4'"),
        (["diagram", "Listen", "--run", PAST], f"Error: there is no run '{PAST}'"),
    ],
)
def test_the_command_line_refuses_them_in_one_line_exit_2(
    url: str, args: list[str], said: str
) -> None:
    result = CliRunner().invoke(cli, [*args, "--app", APP, "--database", url])
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert result.exit_code == 2, result.output
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("Error: ") and said in line
