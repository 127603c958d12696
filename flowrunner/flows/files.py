"""Flows as files (YAML, JSON, or CSV with one row per step), to keep in version control.

An import is all or nothing: every flow and step in the file is judged first, and
one bad row refuses the whole file with every problem listed by row; nothing is
written. With ``replace`` a flow of the same name is replaced. A YAML file::

    flows:
      - name: Small orders
        start: created
        condition: amount <= 10000
        steps:
          - {position: 1, kind: send, title: Send to supplier}
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import sqlalchemy as sa
import yaml

from flowrunner import binding as binding_mod
from flowrunner import errors, query
from flowrunner.flows import edits, spelling, validation, versions
from flowrunner.foundations import shapes
from flowrunner.store import app_tables, flow_rows, flow_versions

# CSV columns for the flow a step belongs to; the step's own columns follow.
CSV_FLOW_PREFIX = "flow_"
# What may stand between a CSV file's columns: a comma, or what a spreadsheet writes.
_DELIMITERS = (",", ";", "\t")
# The key an export gives the version a flow's rows were last published as: read back,
# it says where the file came from and is not a column.
VERSION = "version"


class FileInvalid(errors.FlowrunnerError):
    """A flows file that cannot be read at all (not YAML, not a list of flows)."""


@dataclass
class FlowDoc:
    """One flow of a file: its row and its step rows."""

    flow: shapes.RowDict
    steps: list[shapes.RowDict] = field(default_factory=list)


@dataclass
class ImportResult:
    created: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)
    steps: int = 0


# -- reading files -----------------------------------------------------------------


# libyaml's parser where PyYAML has it (its wheels do), with the safe loader's own
# constructor: the same documents, about thirteen times as fast (a flows file of 3 KB:
# 10.4 ms with PyYAML's parser in Python, 0.8 ms).
_FAST = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_FAST):  # type: ignore[misc,valid-type]  # libyaml's, when PyYAML has it
    """The safe loader, refusing a mapping that names one key twice: YAML's rule, which
    PyYAML leaves to the reader — it keeps the last and drops the first without a word."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[object, object]:
        seen: dict[object, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # ``<<``: keys merged in may be given again, as YAML says
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            try:
                first = seen.get(key)
            except TypeError:  # a key that cannot be one: the constructor says so
                break
            if first is not None:
                lines = f"line {line}" if first == line else f"lines {first} and {line}"
                raise _twice(f"{key!r} is given twice in one mapping ({lines}): keep one")
            seen[key] = line
        return super().construct_mapping(node, deep=deep)  # type: ignore[no-any-return]


def _twice(said: str) -> FileInvalid:
    """A file that names something twice, refused: read, it would keep one and drop the other."""
    return FileInvalid(f"{said} — read as it is, the file would lose the other")


# libyaml's words for where a text stops being YAML, and what a person should do.
_YAML_PROBLEMS = {
    "mapping values are not allowed in this context": (
        "a value holding ': ' must be in quotes (message: 'Note: call back'), "
        "or this line is indented too far"
    ),
    "did not find expected ',' or '}'": (
        "a { … } is not closed, or a value in it holds ': ' or ',' and must be in quotes"
    ),
    "did not find expected ',' or ']'": (
        "a [ … ] is not closed, or a value in it holds ',' and must be in quotes"
    ),
    "found a tab character that violates indentation": "a tab indents it: indent with spaces",
    "found character that cannot start any token": (
        "a value starts with a sign YAML keeps for itself (@, `, % or a tab): put it in quotes"
    ),
    "did not find expected '-' indicator": "it is not indented as the lines before it",
    "did not find expected key": "it is not indented as the lines before it",
    "found unexpected end of stream": "a quoted text or a list is not closed by the end",
    "did not find expected node content": "a value is missing: a [ or { not closed?",
}


def loads_yaml(text: str) -> list[FlowDoc]:
    """The flows of a YAML text: a list of flows, or a mapping with a ``flows`` list.

    A text that is no YAML is refused with the line where it stops being YAML and, for
    the usual slips, what to do (a value holding ``: `` in quotes, spaces not tabs); a
    mapping that names one key twice is refused rather than read with the last.
    """
    try:
        data = yaml.load(text, Loader=_Loader)  # a safe loader
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        # libyaml marks a text that ends too soon on the line after its last one.
        line = None if mark is None else min(mark.line + 1, text.count("\n") + 1)
        where = f" at line {line}" if line is not None else ""
        problem = str(getattr(exc, "problem", "") or "")
        why = _YAML_PROBLEMS.get(problem, problem)
        said = f": {why}" if why else ""
        raise FileInvalid(f"the file is not readable YAML{where}{said}") from None
    except UnicodeEncodeError:  # a lone surrogate, which no YAML reader takes
        raise FileInvalid("the file is not readable YAML") from None
    except ValueError:  # read, but no value: a date that is none (2026-02-30), 5,000 digits
        raise FileInvalid(
            "the file holds a value YAML reads but cannot make: a date that is no day "
            "(2026-02-30), or a number too long; quote it to keep it as text"
        ) from None
    return _docs(data)


def loads_json(text: str) -> list[FlowDoc]:
    """The flows of a JSON text, shaped as in YAML: ``{"flows": [...]}`` or a list (a byte
    order mark before it, as some editors save, is no part of it)."""
    try:
        data = json.loads(text.removeprefix("\ufeff"), object_pairs_hook=_unique)
    except json.JSONDecodeError as exc:
        raise FileInvalid(f"the file is not readable JSON at line {exc.lineno}") from None
    except ValueError:  # thousands of digits, which Python refuses to read as a number
        raise FileInvalid("the file holds a number too long to read") from None
    return _docs(data)


def _docs(data: object) -> list[FlowDoc]:
    if isinstance(data, Mapping) and set(data) == {"flows"}:
        data = data["flows"]
    if data is None:
        return []
    if not isinstance(data, list):
        raise FileInvalid("the file must hold a list of flows (or 'flows:' with a list)")
    docs = []
    for number, item in enumerate(data, 1):
        if not isinstance(item, Mapping):
            raise FileInvalid(f"flow {number} in the file is not a mapping of columns")
        flow = {str(k): v for k, v in item.items() if k != "steps"}
        steps = item.get("steps") or []
        if not isinstance(steps, list) or not all(isinstance(s, Mapping) for s in steps):
            raise FileInvalid(f"the steps of flow {number} must be a list of mappings")
        docs.append(FlowDoc(flow, [{str(k): v for k, v in s.items()} for s in steps]))
    return docs


def _unique(pairs: list[tuple[str, object]]) -> dict[str, object]:
    """A JSON object whose names are each given once (JSON's readers keep the last)."""
    found: dict[str, object] = {}
    for name, value in pairs:
        if name in found:
            raise _twice(f"{name!r} is given twice in one object: keep one")
        found[name] = value
    return found


def loads_csv(text: str) -> list[FlowDoc]:
    r"""The flows of a CSV text: one row per step, the flow's columns prefixed ``flow_``.

    Read as a spreadsheet saves it too: a byte order mark before the first column (Excel's
    "CSV UTF-8"), and semicolons or tabs between the columns where the header line has
    them instead of commas (Excel in many locales). A header line without ``flow_name``
    is refused in one sentence naming what it holds.

    >>> [doc.flow for doc in loads_csv("\ufeffflow_name;flow_start\r\nChase;created\r\n")]
    [{'name': 'Chase', 'start': 'created'}]
    """
    text = text.removeprefix("\ufeff")
    header = text.split("\n", 1)[0]
    if not header.strip():
        return []
    delimiter = max(_DELIMITERS, key=header.count)  # a comma where they tie
    reader = csv.DictReader(io.StringIO(text), delimiter=delimiter)
    names = [name.strip() for name in reader.fieldnames or []]
    if CSV_FLOW_PREFIX + "name" not in names:
        shown = ", ".join(repr(name) for name in names[:6]) + (", …" if len(names) > 6 else "")
        raise FileInvalid(
            "the first line of a CSV file names its columns, flow_name, position and kind "
            f"among them (as flows export writes it); this one names {shown or 'nothing'}"
        )
    twice = sorted({name for name in names if name and names.count(name) > 1})
    if twice:
        named = ", ".join(map(repr, twice))
        raise _twice(f"the first line of the CSV file names {named} twice: keep one column of each")
    reader.fieldnames = names
    docs: dict[str, FlowDoc] = {}
    for line in reader:
        beyond = [cell for cell in line.pop(None, None) or () if cell and cell.strip()]
        if beyond:
            raise FileInvalid(
                f"line {reader.line_num} of the CSV file holds more values than its first "
                f"line names columns: {beyond[0]!r} has no column — name it, or remove it"
            )
        flow = {
            k.removeprefix(CSV_FLOW_PREFIX): v
            for k, v in line.items()
            if k and k.startswith(CSV_FLOW_PREFIX)
        }
        step = {k: v for k, v in line.items() if k and not k.startswith(CSV_FLOW_PREFIX) and v}
        name = str(flow.get("name") or "")
        doc = docs.setdefault(name, FlowDoc({k: v for k, v in flow.items() if v not in ("", None)}))
        if step:
            doc.steps.append(step)
    return list(docs.values())


def read_file(path: str | Path) -> list[FlowDoc]:
    """The flows of a ``.yaml``/``.yml``, ``.json`` or ``.csv`` file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise FileInvalid(f"cannot read {path}: {exc.strerror}") from None
    suffix = path.suffix.lower()
    if suffix == ".csv":
        return loads_csv(text)
    return loads_json(text) if suffix == ".json" else loads_yaml(text)


# -- judging and importing ---------------------------------------------------------


def _clean_steps(steps: Sequence[shapes.Row]) -> list[shapes.RowDict]:
    # Ids in a file belong to another database; the import gives new ones.
    return [{k: v for k, v in s.items() if k not in ("id", "flow_id")} for s in steps]


def problems(
    binding: binding_mod.FlowBinding,
    docs: Sequence[FlowDoc],
    columns: Mapping[str, query.ColumnType],
    *,
    stored: Sequence[shapes.Row] = (),
    replace: bool = False,
    subflows: Sequence[shapes.Row] = (),
) -> list[tuple[str, list[errors.FieldError]]]:
    """Every problem of every row in ``docs``, by row label, given the stored flows (and
    their subflow steps, ``subflows``: a subflow may name a stored flow or one of the file)."""
    found: list[tuple[str, list[errors.FieldError]]] = []
    names = {_key(binding, d.flow) for d in docs}
    existing = [f for f in stored if not (replace and _key(binding, f) in names)]
    in_file = [
        {**{k: v for k, v in d.flow.items() if k != VERSION}, "id": f"file:{i}"}
        for i, d in enumerate(docs)
    ]
    file_subflows = [
        {**s, "flow_id": f"file:{i}"} for i, d in enumerate(docs) for s in _clean_steps(d.steps)
    ]
    for number, doc in enumerate(docs):
        flow = {k: v for k, v in doc.flow.items() if k not in ("id", VERSION)}
        others = existing + in_file[:number]
        steps = _clean_steps(doc.steps)
        for label, errs in validation.errors_for_flow(
            binding, flow, steps, columns, existing=others
        ):
            found.append((label if flow.get("name") else f"flow {number + 1}: {label}", errs))
        ways = [*subflows, *(s for s in file_subflows if s["flow_id"] != f"file:{number}")]
        flows = [*existing, *(f for i, f in enumerate(in_file) if i != number)]
        flow_here = {**flow, "id": f"file:{number}"}
        for step, error in validation.subflow_problems(binding, flow_here, steps, flows, ways):
            found.append((validation.step_label(step, flow), [error]))
    return found


def import_flows(
    conn: sa.Connection,
    binding: binding_mod.FlowBinding,
    tables: app_tables.AppTables,
    docs: Sequence[FlowDoc],
    *,
    replace: bool = False,
    columns: Mapping[str, query.ColumnType] | None = None,
) -> ImportResult:
    """Write every flow of ``docs`` in the caller's transaction, or refuse them all.

    Raises ``validate.RowsInvalid`` (a ``RowInvalid``) listing every bad row.
    """
    cols = edits.resource_columns(binding, tables, columns)
    stored = flow_rows.all_flows(conn, tables)
    subflows = flow_rows.subflow_steps(conn, tables)
    found = problems(binding, docs, cols, stored=stored, replace=replace, subflows=subflows)
    if found:
        raise validation.RowsInvalid(found)
    result = ImportResult()
    by_key = {_key(binding, f): f for f in stored}
    for doc in docs:
        old = by_key.get(_key(binding, doc.flow))
        name = str(doc.flow.get("name")).strip()
        flow = {k: v for k, v in doc.flow.items() if k not in ("id", VERSION)}
        if old is not None:
            # Replaced in place: the flow keeps its id and versions, its steps their ids
            # where their titles say which they are.
            edits.replace_flow(conn, binding, tables, old["id"], flow, _clean_steps(doc.steps))
            result.replaced.append(name)
        else:
            edits.write_flow(conn, binding, tables, flow, _clean_steps(doc.steps))
            result.created.append(name)
        result.steps += len(doc.steps)
    return result


def _key(binding: binding_mod.FlowBinding, flow: shapes.Row) -> tuple[object, str | None]:
    # Names are one whatever their case: --replace replaces 'Big orders' with 'big orders'.
    tenant = flow.get(binding.tenant) if binding.tenant else None
    return (tenant, spelling.name_key(flow.get("name")))


# -- exporting ---------------------------------------------------------------------


def export_flows(
    conn: sa.Connection, binding: binding_mod.FlowBinding, tables: app_tables.AppTables
) -> list[FlowDoc]:
    """Every stored flow with its steps, with empty columns and ids left out; a flow whose
    rows are its latest published version says which (``version: 3``)."""
    docs = []
    stored = flow_rows.all_flows(conn, tables)
    published = (
        flow_versions.latest(conn, binding.resource, [f["id"] for f in stored])
        if flow_versions.kept(conn)
        else {}
    )
    for flow in stored:
        # Only flowrunner's columns travel: the application's own stay in its database.
        keep = {*binding_mod.FLOW_COLUMNS, binding.tenant} - {"id"}
        row = {k: v for k, v in flow.items() if k in keep and not _empty(v)}
        if row.get("active") in (True, 1):
            row.pop("active")
        else:
            row["active"] = False
        order = [*binding_mod.STEP_COLUMNS, *binding.input_columns]
        steps = [
            {
                k: step[k]
                for k in order
                if k in step and k not in ("id", "flow_id") and not _empty(step[k])
            }
            for step in flow_rows.steps_of_flow(conn, tables, flow["id"])
        ]
        latest = published.get(str(flow["id"]))
        if latest is not None:
            owner = flow.get(binding.tenant) if binding.tenant else None
            draft = versions.published(
                {**flow, "tenant": owner}, flow_rows.steps_of_flow(conn, tables, flow["id"])
            )
            if draft.digest == latest.digest:
                row[VERSION] = latest.number
        docs.append(FlowDoc(row, steps))
    return docs


def dumps_yaml(docs: Sequence[FlowDoc]) -> str:
    data = {"flows": [{**d.flow, "steps": d.steps} for d in docs]}
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)


def dumps_json(docs: Sequence[FlowDoc]) -> str:
    """The flows as one JSON document, shaped as the YAML: ``{"flows": [...]}``."""
    data = {"flows": [{**d.flow, "steps": d.steps} for d in docs]}
    return json.dumps(data, ensure_ascii=False, indent=2, default=str) + "\n"


def dumps_csv(docs: Sequence[FlowDoc], binding: binding_mod.FlowBinding) -> str:
    flow_cols = [
        *binding_mod.FLOW_COLUMNS[1:],
        *([binding.tenant] if binding.tenant else []),
        VERSION,
    ]
    step_cols = [
        c for c in (*binding_mod.STEP_COLUMNS, *binding.input_columns) if c not in ("id", "flow_id")
    ]
    out = io.StringIO()
    writer = csv.DictWriter(out, [CSV_FLOW_PREFIX + c for c in flow_cols] + step_cols)
    writer.writeheader()
    for doc in docs:
        head = {CSV_FLOW_PREFIX + k: _cell(v) for k, v in doc.flow.items()}
        for step in doc.steps or [{}]:
            writer.writerow({**head, **{k: _cell(v) for k, v in step.items()}})
    return out.getvalue()


def _cell(value: object) -> object:
    if isinstance(value, bool):
        return "true" if value else "false"
    return value


def _empty(value: object) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())
