"""A record's page: the record itself (the columns its binding shows, those the reader
may read), its runs newest first (flow, status, where each waits and for what, what each
step took in and answered, its diagram with the run drawn over it, its history in
sentences), and the manual flows an operator may start on it. The header's search finds
a record by its key or by what people know it by (``record_search``: ``PO-3299``)."""

from __future__ import annotations

import urllib.parse
from collections.abc import Sequence
from typing import Any

from starlette.responses import Response

from flowrunner import errors, query
from flowrunner.flows import snapshot
from flowrunner.flows.editor import TenantRows
from flowrunner.foundations import statuses
from flowrunner.store import operations as ops
from flowrunner.store import records
from flowrunner.web.console import refresh, run_view
from flowrunner.web.console.page import Page

SEARCH_LIMIT = 20


def found_records(page: Page, text: str) -> list[dict[str, Any]]:
    """The reader's tenant's records ``text`` names: the one of that key, and those
    whose ``record_search`` columns hold it (in any case), each once, key order."""
    runner = page.runner
    tables = runner.tables
    with page.reading() as conn:
        found = records.find_records(
            conn, tables, runner.binding.record_search, text, page.tenant, limit=SEARCH_LIMIT
        )
        try:
            keyed = records.load_record(conn, tables, text, page.tenant)
        except errors.RecordRejected:
            keyed = None
    key = tables.key
    if keyed is not None and all(str(r[key]) != str(keyed[key]) for r in found):
        found.insert(0, keyed)
    return found


def key_for(page: Page, text: str) -> str:
    """The key of the one record ``text`` names (``PO-3299`` → ``3299``), for a filter
    on runs by record; ``text`` itself when it names none, or several."""
    if not page.runner.binding.record_search or not text.strip():
        return text
    found = found_records(page, text)
    return str(found[0][page.runner.tables.key]) if len(found) == 1 else text


def lookup(page: Page) -> Response:
    """The header's search: to the record's page when one record is found (by its key
    or its label), else a list of those found, or a page saying none is."""
    text = page.query.get("id", "").strip()
    if not text:
        return page.redirect("/")
    found = found_records(page, text)
    key = page.runner.tables.key
    if len(found) == 1:
        return page.redirect("/record/" + urllib.parse.quote(str(found[0][key]), safe=""))
    if not found and (not page.runner.binding.record_search or _is_key(page, text)):
        # Its page says: a deleted record's runs are kept, and shown there.
        return page.redirect("/record/" + urllib.parse.quote(text, safe=""))
    labels = page.runner.binding.record_search
    return page.render(
        "found.html",
        status=200 if found else 404,
        text=text,
        resource=page.runner.binding.resource,
        found=[(row[key], [row.get(c) for c in labels]) for row in found],
        labels=labels,
        more=len(found) >= SEARCH_LIMIT,
    )


def tested_columns(runs: Sequence[ops.RunRow]) -> list[str]:
    """The record's columns the conditions of its runs' flows and steps read, each once:
    what decided the way its runs went."""
    found: dict[str, None] = {}
    for run in runs:
        try:
            snap = snapshot.FlowSnapshot.from_dict(run.snapshot)
        except (KeyError, TypeError, ValueError):
            continue  # a workflow in code: no conditions of rows
        texts = [snap.flow.condition, *(step.get("condition") for step in snap.steps)]
        for said in texts:
            if not isinstance(said, str) or not said.strip():
                continue
            try:
                found.update(dict.fromkeys(sorted(query.parse(said).columns)))
            except errors.QueryError:
                continue
    return list(found)


def shown_values(
    page: Page, record: dict[str, Any] | None, runs: Sequence[ops.RunRow]
) -> list[tuple[str, Any]]:
    """The record's columns its page shows, those the reader may read, with their
    values: the binding's ``record_columns``, else its key, ``record_search`` and set
    columns (``FlowBinding.shown_columns``) and those its runs' conditions read."""
    if record is None:
        return []
    binding = page.runner.binding
    columns = list(binding.shown_columns)
    if not binding.record_columns:
        columns += [c for c in tested_columns(runs) if c not in columns]
    access = page.console.access
    return [
        (column, record.get(column))
        for column in columns
        if column in record and access.reads_column(page.reader, binding.resource, column)
    ]


def record_page(page: Page, *, refused: str | None = None) -> Response:
    runner = page.runner
    record_id = page.params["record_id"]
    try:
        key = _key(page, record_id)
    except errors.OperatorError:
        known = key_for(page, record_id)  # an address naming it as people do: /record/PO-7
        if known == record_id:
            raise
        return page.redirect("/record/" + urllib.parse.quote(known, safe=""))
    runs = runner.operations.runs(key, tenant=page.tenant)
    with page.reading() as conn:
        record = records.load_record(conn, runner.tables, runner.tables.key_value(key), page.tenant)
        if record is None and not runs:
            raise errors.OperatorError(
                f"there is no {runner.binding.resource} {record_id!r}",
                status_code=404,
                code="record_unknown",
            )
        named = run_view.records_named(conn, page, [key])[str(key)]
        views = [run_view.view(conn, page, run, record=named) for run in runs]
        manual = [
            flow
            for flow in TenantRows(runner.mounted).flows(conn, page.tenant)
            if flow.get("start") == "manual" and flow.get("active") in (True, 1, None)
        ]
    may_start = record is not None and page.console.access.may(page.reader, "start", None)
    return page.render(
        "record.html",
        status=409 if refused else 200,
        record_id=key,
        resource=runner.binding.resource,
        # How people name the record: the binding's record_label, else the table and id.
        heading=(
            runner.binding.record_name(record, key)
            if runner.binding.record_label is not None and record is not None
            else f"{runner.binding.resource_label} {key}"
        ),
        exists=record is not None,
        values=shown_values(page, record, runs),
        views=views,
        manual=manual if may_start else [],
        may_start=may_start,
        refused=refused,
        ended=statuses.ENDED,
        refresh=refresh.of(page, f"/record/{record_id}"),
    )


def _is_key(page: Page, text: str) -> bool:
    try:
        page.runner.tables.key_value(text)
    except errors.RecordRejected:
        return False
    return True


def _key(page: Page, record_id: str) -> str:
    """The record's key as runs keep it; an id its column cannot hold names no record."""
    try:
        return str(page.runner.tables.key_value(record_id))
    except errors.RecordRejected:
        raise errors.OperatorError(
            f"there is no {page.runner.binding.resource} {record_id!r}",
            status_code=404,
            code="record_unknown",
        ) from None


def start(page: Page) -> Response:
    """An operator starts a manual flow on the record; journaled with their name."""
    record_id = page.params["record_id"]
    flow: Any = page.form.get("flow")
    if not page.console.access.may(page.reader, "start", None):
        raise errors.OperatorError(
            f"{page.reader.name} may not start flows", status_code=403, code="not_allowed"
        )
    try:
        run_id = page.runner.start(
            flow, _key(page, record_id), operator=page.reader.name, tenant=page.tenant
        )
    except errors.OperatorError as refused:
        if refused.status_code == 404 and refused.code == "record_unknown":
            raise
        return record_page(page, refused=str(refused))
    return page.redirect(f"/record/{record_id}", said=f"Started run {run_id}.")


ROUTES = [
    ("GET", "/record", lookup),
    ("GET", "/record/{record_id}", record_page),
    ("POST", "/record/{record_id}/start", start),
]
