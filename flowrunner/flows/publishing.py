"""A flow's versions as the people who change it use them: publish, list, compare, roll
back, and move waiting runs from one version to another.

``runner.publish`` and friends are these (``FlowRunner.publishing``). The versions are
kept by ``store.flow_versions``; what differs between two, and how a waiting run's state
stands on another, is ``flows.versions`` (pure). A flow's rows are its draft: on a
binding with ``publish="explicit"`` runs start on its latest published version, on one
with ``publish="on_save"`` on the rows as they are (each state of them kept as a
version). Every change is journaled.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa

from flowrunner import errors
from flowrunner.binding import Tenant
from flowrunner.engine.mounted import Mounted
from flowrunner.flows import edits, subflows, validation, versions
from flowrunner.flows.snapshot import FlowSnapshot
from flowrunner.foundations import shapes
from flowrunner.store import dialects, flow_rows, flow_versions
from flowrunner.store import operations as ops

DRAFT = "draft"
# How many runs one statement moves.
MOVES_AT_ONCE = 500


@dataclass(frozen=True)
class MoveOutcome:
    """What became of one waiting run: moved to the version (or would be, on a dry run),
    or refused with the sentence that says why."""

    run_id: int
    moved: bool
    sentence: str
    dry_run: bool = False


@dataclass(frozen=True)
class Comparison:
    """Two versions of a flow (a number, or ``"draft"``) and what differs between them."""

    flow: str
    before: int | str
    after: int | str
    changes: tuple[versions.Change, ...]

    @property
    def sentences(self) -> list[str]:
        return [change.sentence for change in self.changes]


class Publishing:
    """One runner's flows' versions."""

    def __init__(self, mounted: Mounted) -> None:
        self.mounted = mounted

    # -- publishing ------------------------------------------------------------------------

    def publish(
        self,
        conn: sa.Connection,
        flow: object,
        *,
        by: str,
        note: str = "",
        tenant: Tenant = None,
    ) -> flow_versions.VersionRow:
        """Publish the flow's rows (its draft) as its next version; the version.

        The whole flow is checked once more first (its rows, gotos, loops without a
        wait, kinds the binding still has): ``OperatorError`` (422) listing every
        problem, and nothing published. A draft the same as the latest version is
        refused too (409: nothing to publish). Written in ``conn``'s transaction.
        """
        row = self._flow(conn, flow, tenant)
        draft = self._draft(conn, row)
        problems = validation.sentences(draft, self.mounted.binding, self.mounted.columns)
        if problems:
            raise errors.OperatorError(
                f"flow {row['name']!r} cannot be published: " + "; ".join(problems),
                status_code=422,
                code="flow_broken",
            )
        return self._publish(conn, row, draft, by=by, note=note, action="publish")

    def roll_back(
        self,
        conn: sa.Connection,
        flow: object,
        to: int,
        *,
        by: str,
        note: str = "",
        tenant: Tenant = None,
    ) -> flow_versions.VersionRow:
        """Publish version ``to``'s rows again as the flow's next version (its history is
        never rewritten); the flow's rows — its draft — become those rows too. The new
        version. Written in ``conn``'s transaction."""
        m = self.mounted
        row = self._flow(conn, flow, tenant)
        earlier = self._version(conn, row, to)
        snap = FlowSnapshot.from_dict(earlier.snapshot)
        with conn.begin_nested():
            flow_rows.delete_steps_of_flow(conn, m.tables, row["id"])
            stored = {
                **row,
                "name": snap.flow.name,
                "start": snap.flow.start,
                "condition": snap.flow.condition,
                "changes": snap.flow.changes,
                "schedule": snap.flow.schedule,
            }
            flow_rows.store_flow(conn, m.tables, row["id"], edits.flow_values(m.binding, stored))
            for step in validation.step_rows(snap):
                # Each step keeps its id, so runs that wait at it can move to the version.
                values = edits.step_values(
                    m.binding, {**step, "flow_id": row["id"]}, stored, extra=tuple(step)
                )
                flow_rows.insert_step(conn, m.tables, values)
        said = note or f"rolled back to version {to}"
        return self._publish(
            conn, row, self._draft(conn, row), by=by, note=said, action="roll_back", to=to
        )

    # -- reading -----------------------------------------------------------------------

    def versions(self, flow: object, *, tenant: Tenant = None) -> list[flow_versions.VersionRow]:
        """Every published version of the flow, first to latest: its number, when and by
        whom it was published, its note, its digest and how many open runs started on it."""
        m = self.mounted
        with m.engine.connect() as conn:
            row = self._flow(conn, flow, tenant)
            return flow_versions.versions_of(conn, m.binding.resource, row["id"])

    def compare(
        self, flow: object, before: int | str, after: int | str = DRAFT, *, tenant: Tenant = None
    ) -> Comparison:
        """What changes from version ``before`` to ``after`` (a number, or ``"draft"``: the
        flow's rows as they are), typed and as sentences."""
        with self.mounted.engine.connect() as conn:
            row = self._flow(conn, flow, tenant)
            one, two = self._side(conn, row, before), self._side(conn, row, after)
        return Comparison(str(row["name"]), before, after, tuple(versions.compare(one, two)))

    # -- moving runs -------------------------------------------------------------------

    def move_runs(
        self,
        flow: object,
        *,
        from_version: int,
        to_version: int | None = None,
        by: str,
        dry_run: bool = True,
        tenant: Tenant = None,
    ) -> list[MoveOutcome]:
        """Move each open run that started on version ``from_version`` to ``to_version``
        (default: the latest), where the steps it waits at are still there; refuse the
        others with a sentence. A dry run says the same and moves nothing.

        A moved run keeps its answers, reminders sent, timers and logical start, and
        executes the new version's rows from where it waits; its history says who moved
        it from which version to which, and the journal has the move. A run saved by a
        worker while it was being moved stays as it is, and says so.
        """
        m = self.mounted
        resource = m.binding.resource
        with dialects.begin(m.engine) as conn:
            row = self._flow(conn, flow, tenant)
            known = flow_versions.versions_of(conn, resource, row["id"])
            if not known:
                raise _refused(f"flow {row['name']!r} has no published version", 409)
            to = known[-1].number if to_version is None else to_version
            source = next((v for v in known if v.number == from_version), None)
            target = next((v for v in known if v.number == to), None)
            if source is None or target is None:
                missing = from_version if source is None else to
                raise _refused(f"flow {row['name']!r} has no version {missing}", 404)
            before = FlowSnapshot.from_dict(source.snapshot)
            after = FlowSnapshot.from_dict(target.snapshot)
            outcomes: list[MoveOutcome] = []
            moves: list[flow_versions.Move] = []
            # A subflow's child keeps the parent its snapshot names, to wake it when it ends.
            parents: dict[int, object] = {}
            for run in flow_versions.open_runs_of(conn, resource, row["id"], source.digest):
                if flow_versions.version_of_run(known, run.digest, run.started_at) != source.number:
                    continue
                moved = versions.moved_state(run.id, run.state, before, after, to)
                if isinstance(moved, str):
                    outcomes.append(MoveOutcome(run.id, False, moved, dry_run))
                    continue
                said = f"run {run.id} moves from version {source.number} to version {to}"
                outcomes.append(MoveOutcome(run.id, True, said, dry_run))
                moves.append(
                    flow_versions.Move(run.id, run.tenant, run.record_id, run.version, moved.state)
                )
                if (run.started_by or "").startswith("run "):
                    stored = ops.find_run(conn, run.id)
                    if stored is not None and subflows.PARENT in stored.snapshot:
                        parents[run.id] = stored.snapshot[subflows.PARENT]
            if dry_run:
                conn.rollback()
                return outcomes
            done: set[int] = set()
            detail: shapes.JsonDict = {
                "by": by,
                "flow": str(row["name"]),
                "from": source.number,
                "to": to,
            }
            kept = after.to_dict()
            batches = [
                (kept, batch[first : first + MOVES_AT_ONCE])
                for batch in ([move for move in moves if move.run_id not in parents],)
                for first in range(0, len(batch), MOVES_AT_ONCE)
            ]
            batches += [
                ({**kept, subflows.PARENT: parents[move.run_id]}, [move])
                for move in moves
                if move.run_id in parents
            ]
            for snapshot, batch in batches:
                done |= flow_versions.move_runs(
                    conn,
                    batch,
                    snapshot=snapshot,
                    digest=after.digest,
                    now=m.clock(),
                    by=by,
                    resource=resource,
                    detail=detail,
                )
        return [_moved(outcome, outcome.run_id in done, source.number, to) for outcome in outcomes]

    # -- helpers -----------------------------------------------------------------------

    def _flow(self, conn: sa.Connection, flow: object, tenant: Tenant) -> shapes.RowDict:
        m = self.mounted
        owner = None if m.binding.tenant is None else m.need_tenant(tenant)
        found = flow_rows.flow_by_name_or_id(conn, m.tables, flow, owner)
        if found is None:
            raise _refused(f"there is no flow {flow!r}", 404, "flow_unknown")
        return found

    def _draft(self, conn: sa.Connection, row: shapes.RowDict) -> FlowSnapshot:
        """The flow's rows as a version would keep them."""
        m = self.mounted
        flow = dict(row)
        if m.tables.tenant is not None:
            flow["tenant"] = flow.pop(m.tables.tenant)
        return versions.published(flow, flow_rows.steps_of_flow(conn, m.tables, row["id"]))

    def _version(
        self, conn: sa.Connection, row: shapes.RowDict, number: int
    ) -> flow_versions.VersionRow:
        found = flow_versions.version(conn, self.mounted.binding.resource, row["id"], number)
        if found is None:
            raise _refused(f"flow {row['name']!r} has no version {number}", 404)
        return found

    def snapshots(
        self, flow: object, *sides: int | str, tenant: Tenant = None
    ) -> list[FlowSnapshot]:
        """The flow as each of ``sides`` keeps it: a version's number, or ``"draft"`` (its
        rows as a version would keep them)."""
        with self.mounted.engine.connect() as conn:
            row = self._flow(conn, flow, tenant)
            return [self._side(conn, row, which) for which in sides]

    def _side(self, conn: sa.Connection, row: shapes.RowDict, which: int | str) -> FlowSnapshot:
        if str(which).strip().lower() == DRAFT:
            return self._draft(conn, row)
        try:
            number = int(str(which))
        except ValueError:
            raise _refused(
                f"{which!r} is not a version: give its number, or 'draft'", 422
            ) from None
        return FlowSnapshot.from_dict(self._version(conn, row, number).snapshot)

    def _publish(
        self,
        conn: sa.Connection,
        row: shapes.RowDict,
        snap: FlowSnapshot,
        *,
        by: str,
        note: str,
        action: str,
        to: int | None = None,
    ) -> flow_versions.VersionRow:
        m = self.mounted
        resource = m.binding.resource
        latest = flow_versions.latest(conn, resource, [row["id"]]).get(str(row["id"]))
        if latest is not None and latest.digest == snap.digest and action == "publish":
            raise _refused(
                f"nothing to publish: flow {row['name']!r} is as version {latest.number} has it",
                409,
                "nothing_to_publish",
            )
        now = m.clock()
        number = flow_versions.insert_version(
            conn,
            resource=resource,
            flow_id=row["id"],
            tenant=snap.flow.tenant,
            snapshot=snap.to_dict(),
            digest=snap.digest,
            at=now,
            by=by,
            note=note,
        )
        if number is None:
            raise _refused(
                f"another publish of flow {row['name']!r} came first; look at it again", 409
            )
        detail: shapes.JsonDict = {"flow": row["name"], "version": number, "note": note}
        if to is not None:
            detail["to"] = to
        ops.journal(
            conn,
            operator=by,
            action=action,
            at=now,
            tenant=snap.flow.tenant,
            resource=resource,
            detail=detail,
        )
        found = flow_versions.version(conn, resource, row["id"], number)
        assert found is not None  # written just now, in this transaction
        return found


def _moved(outcome: MoveOutcome, done: bool, source: int, to: int) -> MoveOutcome:
    """A planned move as it went: moved, or saved by a worker meanwhile; a refusal stays."""
    if not outcome.moved:
        return outcome
    run_id = outcome.run_id
    if done:
        return MoveOutcome(
            run_id, True, f"run {run_id} moved from version {source} to version {to}"
        )
    return MoveOutcome(run_id, False, f"run {run_id} moved on while it was being moved; look again")


def _refused(sentence: str, status: int, code: str = "version_refused") -> errors.OperatorError:
    return errors.OperatorError(sentence, status_code=status, code=code)


__all__ = ["DRAFT", "Comparison", "MoveOutcome", "Publishing"]
