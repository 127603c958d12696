"""Flows as files: import all or nothing, export and import again, and the guide's examples."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import pytest
import sqlalchemy as sa
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from fixtures.purchase_orders import app as po
from fixtures.tickets import app as tk
from flowrunner import binding as binding_mod
from flowrunner import query, tables
from flowrunner.flows import files, validation

ROOT = Path(__file__).resolve().parent.parent
BAD = """
flows:
  - name: Good one
    start: manual
    steps:
      - {position: 1, kind: send}
  - name: Bad one
    start: created
    condition: amount >
    steps:
      - {position: 1, kind: wait, duration: 2 dayz, title: Pause}
      - {position: 2, kind: branch, condition: status = open, goto: 8}
      - {position: 3, kind: notify, audience: requester, message: Hello}
"""


def counts(engine: sa.Engine, app: object = po) -> tuple[int, int]:
    flows, steps = (
        (po.po_flow, po.po_flow_step) if app is po else (tk.ticket_flow, tk.ticket_flow_step)
    )
    with engine.connect() as conn:
        return (
            int(conn.scalar(sa.select(sa.func.count()).select_from(flows)) or 0),
            int(conn.scalar(sa.select(sa.func.count()).select_from(steps)) or 0),
        )


def test_an_import_is_all_or_nothing(any_engine: sa.Engine) -> None:
    po.metadata.create_all(any_engine)
    docs = files.loads_yaml(BAD)
    po_tables = tables.reflect(any_engine, po.binding)
    with pytest.raises(validation.RowsInvalid) as caught, any_engine.begin() as conn:
        files.import_flows(conn, po.binding, po_tables, docs)
    labels = [label for label, _ in caught.value.rows]
    assert labels == [
        "flow 'Bad one'",
        "flow 'Bad one', step 'Pause' (wait, position 1)",
        "flow 'Bad one', step (branch, position 2)",
    ]
    codes = [e.code for _, found in caught.value.rows for e in found]
    assert codes == ["condition_invalid", "duration_invalid", "goto_unknown"]
    assert counts(any_engine) == (0, 0)


@pytest.mark.parametrize("app", [po, tk], ids=["purchase_orders", "tickets"])
def test_export_then_import_round_trips(any_engine: sa.Engine, app: object, tmp_path: Path) -> None:
    app.metadata.create_all(any_engine)  # type: ignore[attr-defined]
    binding = app.binding  # type: ignore[attr-defined]
    docs = files.read_file(app.FLOWS_FILE)  # type: ignore[attr-defined]
    app_tables = tables.reflect(any_engine, binding)
    with any_engine.begin() as conn:
        result = files.import_flows(conn, binding, app_tables, docs)
    assert result.created == [d.flow["name"] for d in docs] and not result.replaced
    with any_engine.connect() as conn:
        exported = files.export_flows(conn, binding, app_tables)
    assert [(d.flow["name"], len(d.steps)) for d in exported] == [
        (d.flow["name"], len(d.steps)) for d in docs
    ]
    text = files.dumps_yaml(exported)
    csv_text = files.dumps_csv(exported, binding)
    # Into a second database, from YAML and from CSV alike.
    other = sa.create_engine(f"sqlite:///{tmp_path / 'other.db'}")
    app.metadata.create_all(other)  # type: ignore[attr-defined]
    other_tables = tables.reflect(other, binding)
    with other.begin() as conn:
        files.import_flows(conn, binding, other_tables, files.loads_yaml(text))
    with other.connect() as conn:
        assert files.dumps_yaml(files.export_flows(conn, binding, other_tables)) == text
    # Again from the CSV text, replacing flows by name: the same rows come back.
    with any_engine.begin() as conn:
        again = files.import_flows(
            conn, binding, app_tables, files.loads_csv(csv_text), replace=True
        )
    assert again.replaced == result.created and not again.created
    with any_engine.connect() as conn:
        assert files.dumps_yaml(files.export_flows(conn, binding, app_tables)) == text
    other.dispose()


def spreadsheet(csv_text: str, delimiter: str) -> str:
    """The CSV as a spreadsheet saves it: a byte order mark first, CRLF line ends, and the
    columns apart by ``delimiter`` (Excel writes semicolons in many locales)."""
    rows = list(csv.reader(io.StringIO(csv_text)))
    out = io.StringIO()
    csv.writer(out, delimiter=delimiter, lineterminator="\r\n").writerows(rows)
    return "\ufeff" + out.getvalue()


@pytest.mark.parametrize("delimiter", [",", ";", "\t"], ids=["commas", "semicolons", "tabs"])
def test_a_business_user_edits_the_flows_in_a_spreadsheet_and_imports_them_back(
    sqlite_engine: sa.Engine, tmp_path: Path, delimiter: str
) -> None:
    """Exported as CSV, opened and saved in a spreadsheet, imported again: the same flows,
    whether the spreadsheet wrote commas, semicolons or tabs, with its byte order mark."""
    docs = files.read_file(tk.FLOWS_FILE)
    saved = tmp_path / "flows.csv"
    saved.write_bytes(spreadsheet(files.dumps_csv(docs, tk.binding), delimiter).encode())
    assert files.read_file(saved) == files.loads_csv(files.dumps_csv(docs, tk.binding))
    tk.metadata.create_all(sqlite_engine)
    with sqlite_engine.begin() as conn:
        imported = files.import_flows(
            conn, tk.binding, tables.reflect(sqlite_engine, tk.binding), files.read_file(saved)
        )
    assert imported.created == [d.flow["name"] for d in docs]
    assert counts(sqlite_engine, tk) == (len(docs), sum(len(d.steps) for d in docs))


def test_a_csv_without_the_flows_header_is_refused_in_one_sentence(tmp_path: Path) -> None:
    saved = tmp_path / "flows.csv"
    saved.write_text("name,kind,position\nChase,wait,1\n", encoding="utf-8")
    with pytest.raises(files.FileInvalid) as caught:
        files.read_file(saved)
    assert str(caught.value) == (
        "the first line of a CSV file names its columns, flow_name, position and kind among "
        "them (as flows export writes it); this one names 'name', 'kind', 'position'"
    )
    assert files.loads_csv("") == [] and files.loads_csv("\n") == []


def test_import_without_replace_refuses_known_names(sqlite_engine: sa.Engine) -> None:
    po.metadata.create_all(sqlite_engine)
    docs = files.read_file(po.FLOWS_FILE)
    po_tables = tables.reflect(sqlite_engine, po.binding)
    with sqlite_engine.begin() as conn:
        files.import_flows(conn, po.binding, po_tables, docs)
    with pytest.raises(validation.RowsInvalid) as caught, sqlite_engine.begin() as conn:
        files.import_flows(conn, po.binding, po_tables, docs[:1])
    assert (
        str(caught.value) == "flow 'Big orders': name: there is already a flow named 'Big orders'"
    )
    twice = files.loads_yaml("- {name: Twice, start: manual}\n- {name: Twice, start: created}\n")
    with (
        pytest.raises(validation.RowsInvalid, match="already a flow named 'Twice'"),
        sqlite_engine.begin() as conn,
    ):
        files.import_flows(conn, po.binding, po_tables, twice)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("flows: [", "the file is not readable YAML at line"),
        ("name: x", "the file must hold a list of flows"),
        ("- just text", "flow 1 in the file is not a mapping of columns"),
        ("- {name: x, steps: 3}", "the steps of flow 1 must be a list of mappings"),
        ("2026-02-30", "a date that is no day"),  # found by tests/test_fuzz_console.py
        ("- {name: x, condition: 2026-13-01}", "quote it to keep it as text"),
    ],
)
def test_unreadable_files(text: str, message: str) -> None:
    with pytest.raises(files.FileInvalid, match=message):
        files.loads_yaml(text)


UNREADABLE = "the file is not readable YAML at line"
NOT_CLOSED = "a [ … ] is not closed, or a value in it holds ',' and must be in quotes"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("flows: [", f"{UNREADABLE} 1: a value is missing: a [ or {{ not closed?"),
        ("- {name: x}\n- [1, 2", f"{UNREADABLE} 2: {NOT_CLOSED}"),
        ("- name: x\n  start: [manual\n- name: y\n", f"{UNREADABLE} 3: {NOT_CLOSED}"),
        (
            "- name: x\n  steps:\n    - {position: 1, kind: notify, message: Note: call back}\n",
            f"{UNREADABLE} 3: a {{ … }} is not closed, or a value in it holds ': ' or ',' "
            "and must be in quotes",
        ),
        (
            "- name: x\n  steps:\n    - position: 1\n      message: Note: call back\n",
            f"{UNREADABLE} 4: a value holding ': ' must be in quotes "
            "(message: 'Note: call back'), or this line is indented too far",
        ),
        ("- name: x\n\tstart: manual\n", f"{UNREADABLE} 2: a tab indents it: indent with spaces"),
        (
            "- name: x\n start: manual\n",
            f"{UNREADABLE} 2: it is not indented as the lines before it",
        ),
        (
            "- name: x\n  start: manual\n  start: created\n",
            "'start' is given twice in one mapping (lines 2 and 3): keep one — "
            "read as it is, the file would lose the other",
        ),
        (
            "- {name: x, steps: [{position: 1, kind: wait, duration: 1 day, duration: 2 days}]}",
            "'duration' is given twice in one mapping (line 1): keep one — "
            "read as it is, the file would lose the other",
        ),
        ("- {name: \ud800}", "the file is not readable YAML"),
        ("- {name: x}\n- {name: \x00}", "the file is not readable YAML"),
    ],
)
def test_where_a_file_stops_being_yaml_is_a_line_it_has_and_the_usual_slip_is_named(
    text: str, message: str
) -> None:
    with pytest.raises(files.FileInvalid) as refused:
        files.loads_yaml(text)
    assert str(refused.value) == message


# Flows as a designer writes them: names and text in any script, numbers, yes and no,
# nothing, steps in lists.
_TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)
_VALUE = st.one_of(st.none(), st.booleans(), st.integers(-(2**40), 2**40), _TEXT)
_ROW = st.dictionaries(st.sampled_from(["name", "start", "condition", "title", "x"]), _VALUE)


@settings(max_examples=200)
@given(
    st.lists(
        st.builds(lambda row, steps: {**row, "steps": steps}, _ROW, st.lists(_ROW, max_size=3)),
        max_size=4,
    ),
    st.booleans(),
)
def test_a_flows_file_reads_as_pyyaml_s_own_reader_reads_it(
    flows: list[dict[str, object]], flowing: bool
) -> None:
    text = yaml.safe_dump(flows, allow_unicode=True, default_flow_style=flowing)
    assert files.loads_yaml(text) == files.loads_json(json.dumps(yaml.safe_load(text)))


# -- the business user's guide -----------------------------------------------------

GUIDE = ROOT / "docs" / "flows.md"
BLOCK = re.compile(r"```yaml\n(.*?)```", re.S)
APPS = {"purchase_orders": (po, po.purchase_order), "tickets": (tk, tk.ticket)}


def guide_examples() -> list[str]:
    return BLOCK.findall(GUIDE.read_text(encoding="utf-8"))


def test_the_guide_has_examples() -> None:
    assert len(guide_examples()) >= 8


@pytest.mark.parametrize("number", range(len(guide_examples())))
def test_every_yaml_example_in_the_guide_is_valid(number: int) -> None:
    text = guide_examples()[number]
    # An example names its application on its first line, e.g. "# tickets".
    first = text.splitlines()[0].lstrip("# ").strip() if text.startswith("#") else ""
    app, resource = APPS.get(first, APPS["purchase_orders"])
    docs = files.loads_yaml(text)
    assert docs
    columns = query.column_types(resource)
    assert files.problems(app.binding, docs, columns) == []


def test_every_code_is_in_the_guide() -> None:
    text = GUIDE.read_text(encoding="utf-8").split("## Every problem a row can have")[1]
    documented = set(re.findall(r"^\| `([a-z_]+)` \|", text, re.M))
    assert documented == set(validation.CODES)
    sources = "".join(
        (ROOT / "flowrunner" / "flows" / name).read_text(encoding="utf-8")
        for name in ("rows.py", "column_facts.py", "validation.py", "edits.py", "orm_hook.py")
    )
    # Each code the checks use is listed (a typo in a code would show here).
    # Column names are no codes (``"on_failure"`` in a FieldError names its column).
    columns = {"flow_id", "before_flush", *binding_mod.STEP_COLUMNS}
    used = set(re.findall(r'"([a-z]+_[a-z_]+)"[,)]', sources)) - columns
    assert used - set(validation.CODES) == set()


def test_keys_merged_in_may_be_given_again() -> None:
    """YAML's ``<<`` merges a mapping in, whose keys the mapping may set again."""
    docs = files.loads_yaml("- &base {name: M, start: manual}\n- {<<: *base, name: N}\n")
    assert [d.flow for d in docs] == [
        {"name": "M", "start": "manual"},
        {"name": "N", "start": "manual"},
    ]


def test_a_json_file_that_names_a_column_twice_is_refused() -> None:
    with pytest.raises(files.FileInvalid) as refused:
        files.loads_json('{"flows": [{"name": "x", "start": "manual", "start": "created"}]}')
    assert str(refused.value) == (
        "'start' is given twice in one object: keep one — "
        "read as it is, the file would lose the other"
    )
    assert files.loads_json('[{"name": "x", "steps": [{"position": 1}]}]')[0].steps == [
        {"position": 1}
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "flow_name,position,kind\nChase,1,wait\nChase,2,notify,Tell them\n",
            "line 3 of the CSV file holds more values than its first line names columns: "
            "'Tell them' has no column — name it, or remove it",
        ),
        (
            "flow_name,title,position,title\nChase,Pause,1,Wait a day\n",
            "the first line of the CSV file names 'title' twice: keep one column of each — "
            "read as it is, the file would lose the other",
        ),
    ],
)
def test_a_csv_cell_that_would_be_lost_is_refused(text: str, message: str) -> None:
    with pytest.raises(files.FileInvalid) as refused:
        files.loads_csv(text)
    assert str(refused.value) == message


def test_the_empty_cells_a_spreadsheet_leaves_at_a_rows_end_are_nothing() -> None:
    docs = files.loads_csv("flow_name,position,kind,,\nChase,1,wait,,\nChase,2,wait,, \n")
    assert [d.steps for d in docs] == [
        [{"position": "1", "kind": "wait"}, {"position": "2", "kind": "wait"}]
    ]


def test_a_json_file_saved_with_a_byte_order_mark_is_read() -> None:
    """Some editors on Windows save UTF-8 with a mark before the text."""
    docs = files.loads_json('\ufeff{"flows": [{"name": "Chase", "start": "manual"}]}')
    assert [d.flow for d in docs] == [{"name": "Chase", "start": "manual"}]
