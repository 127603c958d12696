"""The events something waits for that nothing records (``[api-event-unknown]``).

An event is recorded when the application says it emits it (an event declared as a
plain key field, ``"order"``, or ``Event(..., emitted=True)``), a kind records it from
its command's answer (``Kind(records=...)``) or an inbound endpoint emits it. One that a
kind, a stored ``waitFor`` step, a job or a code workflow waits for, recorded by none of
these, would keep them waiting for ever: ``FlowRunner.event_warnings()`` names each, and
``flowrunner flows validate`` prints them.
"""

from __future__ import annotations

from flowrunner.engine.mounted import Mounted
from flowrunner.store import flow_rows

CODE = "api-event-unknown"


def recorded(mounted: Mounted) -> set[str]:
    """The binding's events something records."""
    binding = mounted.binding
    found = {
        name
        for name, declared in binding.events.items()
        if isinstance(declared, str) or declared.emitted
    }
    found.update(kind.records for kind in binding.kinds.values() if kind.records is not None)
    found.update(inbound.emit for inbound in mounted.inbound.values() if inbound.emit is not None)
    return found


def waiters(mounted: Mounted) -> dict[str, list[str]]:
    """Event name -> what waits for it, in words (``kind 'approval'``)."""
    found: dict[str, list[str]] = {}
    for name, kind in mounted.binding.kinds.items():
        if kind.wait_for is not None:
            found.setdefault(kind.wait_for, []).append(f"kind {name!r}")
    jobs = mounted.jobs
    if jobs is not None:
        for name, job in sorted(jobs.jobs.items()):
            if job.on is not None:
                found.setdefault(job.on, []).append(f"job {name!r}")
    if mounted.workflows is not None:
        for event in sorted(mounted.workflows.events()):
            found.setdefault(event, []).append("a code workflow")
    with mounted.engine.connect() as conn:
        names = {f["id"]: f["name"] for f in flow_rows.all_flows(conn, mounted.tables)}
        for step in flow_rows.steps_of_kind(conn, mounted.tables, "waitFor"):
            event = step.get("event")
            if isinstance(event, str) and event.strip():
                said = step.get("title") or f"at position {step['position']}"
                flow = names.get(step["flow_id"], step["flow_id"])
                found.setdefault(event.strip(), []).append(f"step {said!r} of flow {flow!r}")
    return found


def unrecorded(mounted: Mounted) -> list[str]:
    """One warning for each event something waits for that nothing records."""
    known = recorded(mounted)
    declared = mounted.binding.events  # a step naming another is a broken row, said elsewhere
    return [
        f"[{CODE}] {', '.join(who)} {'wait' if len(who) > 1 else 'waits'} for {event!r}, "
        "which nothing records: no kind records it (Kind(records=...)), no inbound "
        "endpoint emits it, and the binding does not say the application emits it "
        "(Event(..., emitted=True))"
        for event, who in sorted(waiters(mounted).items())
        if event in declared and event not in known
    ]
