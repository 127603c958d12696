"""How people name records in what the engine shows a reader: the binding's
``record_label`` (``"{number}"`` → ``PO-3299``) filled from each record, the records read
in one query; a run's page, the command line's runs and a history's lines name them so."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import sqlalchemy as sa

from flowrunner.binding import Tenant
from flowrunner.engine.mounted import Mounted
from flowrunner.store import operations as ops
from flowrunner.store import records

Names = Mapping[str, str]
"""Records' names by their id as runs keep it (``"3299"`` → ``"PO-3299"``)."""


def read(
    mounted: Mounted, conn: sa.Connection, record_ids: Iterable[object], tenant: Tenant = None
) -> dict[str, str]:
    """The names of these records, by id as text. A record the label cannot name (the
    binding has no ``record_label``, the record is gone, its label is empty) is left
    out: it is named by its id. Reads nothing without a ``record_label``."""
    bound = mounted.binding
    if bound.record_label is None:
        return {}
    ids = sorted({str(record_id) for record_id in record_ids if record_id is not None})
    if not ids:
        return {}
    found = records.records_by_key(conn, mounted.tables, ids, tenant)
    names = {key: bound.record_name(record, key) for key, record in found.items()}
    return {key: name for key, name in names.items() if name != key}


def of_runs(
    mounted: Mounted, conn: sa.Connection, run_ids: Iterable[int], tenant: Tenant = None
) -> dict[int, str]:
    """The names of these runs' records, by run id; a run whose record has no name (as
    ``read`` says) is left out. Reads nothing without a ``record_label``."""
    if mounted.binding.record_label is None:
        return {}
    records = ops.records_of_runs(conn, list(run_ids))
    names = read(mounted, conn, records.values(), tenant)
    return {run_id: names[record] for run_id, record in records.items() if record in names}


def named(mounted: Mounted, names: Names, record_id: object) -> str:
    """One record as a reader is shown it: its name (``PO-3299``), or the resource's label
    and its id (``Purchase orders 3299``, ``ticket 3``)."""
    found = names.get(str(record_id))
    return found if found else f"{mounted.binding.resource_label} {record_id}"
