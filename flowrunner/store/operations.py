"""Every store operation under one name, for the worker, the runner and the CLI::

    from flowrunner.store import operations as ops
    ops.claim_due(engine, now=now, owner=owner, limit=10, ttl=timedelta(minutes=5))

Each operation lives in the module of its concept (leases, due work, claims, runs and
their history, events and notices, idempotency and the journal); this module only
gathers them. Operations take an ``sa.Connection`` and run inside the caller's transaction,
except ``claim_due``, ``hand_back``, ``age_leases`` and ``prune``, which run their own.
What the Operations room reads (runs across records, the journal, the outbox, a page at
a time) is in ``listing``.
"""

from __future__ import annotations

from flowrunner.store.claims import claim_due, hand_back
from flowrunner.store.due import (
    Claim,
    due_count,
    next_due,
    set_due,
    wake_record,
)
from flowrunner.store.events import (
    EventRow,
    NoticeRow,
    NoticeState,
    events_after,
    insert_event,
    insert_notice,
    mark_delivered,
    notices,
)
from flowrunner.store.leases import (
    acquire_lease,
    age_leases,
    check_lease,
    expire_lease,
    finish_lease,
    forget_lease,
    lease_holder,
    lease_now,
    new_owner_id,
    refresh_lease,
    release_lease,
    run_lease,
    time_left,
)
from flowrunner.store.ledger import (
    Completed,
    IdemRow,
    JournalRow,
    begin_idempotent,
    complete_idempotent,
    find_idempotent,
    journal,
    journal_entries,
    record_completed,
    record_idempotent,
)
from flowrunner.store.listing import (
    STUCK,
    Page,
    RunFilter,
    RunPage,
    Stuck,
    count_runs,
    find_runs,
    journal_page,
    outbox_page,
    run_flow_names,
    stuck_among,
)
from flowrunner.store.retention import Pruned, prune
from flowrunner.store.runs import (
    LogLine,
    LogRow,
    OpenRuns,
    RunRow,
    append_log,
    append_logs,
    find_run,
    insert_run,
    list_runs,
    load_run,
    mark_restarted,
    open_runs,
    run_history,
    runs_for_record,
    save_run,
)
from flowrunner.store.saves import save_step

__all__ = [
    "STUCK",
    "Claim",
    "Completed",
    "EventRow",
    "IdemRow",
    "JournalRow",
    "LogLine",
    "LogRow",
    "NoticeRow",
    "NoticeState",
    "OpenRuns",
    "Page",
    "Pruned",
    "RunFilter",
    "RunPage",
    "RunRow",
    "Stuck",
    "acquire_lease",
    "age_leases",
    "append_log",
    "append_logs",
    "begin_idempotent",
    "check_lease",
    "claim_due",
    "complete_idempotent",
    "count_runs",
    "due_count",
    "events_after",
    "expire_lease",
    "find_idempotent",
    "find_run",
    "find_runs",
    "finish_lease",
    "forget_lease",
    "hand_back",
    "insert_event",
    "insert_notice",
    "insert_run",
    "journal",
    "journal_entries",
    "journal_page",
    "lease_holder",
    "lease_now",
    "list_runs",
    "load_run",
    "mark_delivered",
    "mark_restarted",
    "new_owner_id",
    "next_due",
    "notices",
    "open_runs",
    "outbox_page",
    "prune",
    "record_completed",
    "record_idempotent",
    "refresh_lease",
    "release_lease",
    "run_flow_names",
    "run_history",
    "run_lease",
    "runs_for_record",
    "save_run",
    "save_step",
    "set_due",
    "stuck_among",
    "time_left",
    "wake_record",
]
