"""What operators do to runs: cancel, retry a failed step, redrive a stuck run, restart a
failed run as a new one — to one run, or to many (``act``).

Each action is checked against the run's resource and tenant (an operator never steers
another tenant's runs) and journaled with the operator's name, in one transaction. An
action that does not apply is refused with ``OperatorError``: a sentence naming the run
and why, and a stable code (``run_ended``, ``run_not_failed``, ``run_restarted``, ...).
With ``dry_run`` an action is done and then rolled back: the same checks, nothing kept.

``act`` does one action to many runs, each in its own transaction: a run the action does
not apply to is refused with its reason and the others go on; the outcomes say, run by
run, what was done.
"""

from __future__ import annotations

import contextlib
import enum
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from flowrunner import binding, errors
from flowrunner.engine.mounted import Claimed, Program, Stepping, program_of
from flowrunner.flows import spelling
from flowrunner.foundations import statuses
from flowrunner.store import dialects
from flowrunner.store import operations as ops

if TYPE_CHECKING:
    from flowrunner.engine.mounted import Mounted


class Action(enum.StrEnum):
    """What an operator does to a run."""

    CANCEL = "cancel"
    """End a run that has not ended; its waiting steps are told."""
    RETRY = "retry"
    """Run a failed run's failed step again."""
    REDRIVE = "redrive"
    """Make a run that has not ended due now, and free its lease (a stuck run goes on)."""
    RESTART = "restart"
    """Start a failed run's flow again as a new run on the same record."""


# How each action reads once done, and before (a dry run).
_DONE = {
    Action.CANCEL: "cancelled",
    Action.RETRY: "retried: its failed step runs again",
    Action.REDRIVE: "redriven: due now, its lease freed",
    Action.RESTART: "restarted",
}
_WOULD = {
    Action.CANCEL: "would be cancelled",
    Action.RETRY: "would be retried",
    Action.REDRIVE: "would be redriven",
    Action.RESTART: "would be restarted as a new run",
}


@dataclass(frozen=True)
class Outcome:
    """What one action did to one run: done, or refused with the reason."""

    run_id: int
    """The run acted on."""
    action: Action
    """What was asked."""
    done: bool
    """Whether the action was done (with ``dry_run``: whether it would be)."""
    refusal: str | None = None
    """Why not, in a sentence naming the run (``run 12 has already ended (done)``)."""
    code: str | None = None
    """The refusal's stable code for programs (``run_ended``, ``run_not_failed``,
    ``run_restarted``, ``run_unknown``, ``flow_deleted``, ...)."""
    restarted_as: int | None = None
    """A restart's new run (None on a dry run, whose new run was rolled back)."""
    dry_run: bool = False
    """True when nothing was kept: the outcome says what the action would do."""

    @property
    def sentence(self) -> str:
        """The outcome on one line: ``run 12 cancelled``, or the refusal."""
        if not self.done:
            return self.refusal or f"run {self.run_id} was refused"
        if self.dry_run:
            return f"run {self.run_id} {_WOULD[self.action]}"
        said = f"run {self.run_id} {_DONE[self.action]}"
        if self.restarted_as is not None:
            said += f" as run {self.restarted_as}"
        return said


def cancel(
    mounted: Mounted,
    run_id: int,
    *,
    operator: str,
    reason: str = "",
    tenant: binding.Tenant = None,
    dry_run: bool = False,
) -> None:
    """Cancel a run that has not ended; journaled with the operator's name.

    The run reads ``cancelled`` as soon as this returns, and nothing more of its flow
    runs. Its waiting steps are told by the next worker advance, which the cancel makes
    due at once: the interpreter ends the run there and the kinds' cancel commands run
    in the worker's transaction, under the run's lease, so each runs once.
    """
    with _acting_on(mounted, run_id, tenant, dry_run) as (conn, run, now):
        if run.status in statuses.FINAL:
            raise _refused(f"run {run_id} has already ended ({run.status})", "run_ended")
        if run.restarted_as is not None:
            raise _refused(
                f"run {run_id} was restarted as run {run.restarted_as}; it stays failed",
                "run_restarted",
            )
        why = f"cancelled by {operator}" + (f": {reason}" if reason else "")
        kept, due = program(mounted, run).cancelled(mounted, run, why, now)
        ops.save_run(
            conn,
            run_id,
            expected_version=run.version,
            state=kept,
            status=statuses.RunStatus.CANCELLED,
            now=now,
            reason=why,
            error=run.error,
        )
        ops.set_due(conn, run_id=run_id, due_at=due, tenant=run.tenant)
        detail = {"by": operator, "reason": reason}
        ops.append_log(conn, run_id=run_id, at=now, what="cancelled", detail=detail)
        _journal(conn, run, operator, "cancel", now, {"reason": reason})


def retry(
    mounted: Mounted,
    run_id: int,
    *,
    operator: str,
    reason: str = "",
    tenant: binding.Tenant = None,
    dry_run: bool = False,
) -> None:
    """Run a failed run's failed step again; journaled (with ``reason``, when given)."""
    with _acting_on(mounted, run_id, tenant, dry_run) as (conn, run, now):
        if run.status != statuses.RunStatus.FAILED:
            raise _refused(f"run {run_id} has not failed ({run.status})", "run_not_failed")
        if run.restarted_as is not None:
            raise _refused(
                f"run {run_id} was restarted as run {run.restarted_as}; that run goes on",
                "run_restarted",
            )
        new_state, status = program(mounted, run).retried(mounted, run, now)
        _go_on(conn, run, now, new_state, status)
        said = {"by": operator, **_given(reason)}
        ops.append_log(conn, run_id=run_id, at=now, what="retried", detail=said)
        _journal(conn, run, operator, "retry", now, _given(reason))


def _go_on(
    conn: sa.Connection,
    run: ops.RunRow,
    now: datetime,
    new_state: Mapping[str, object],
    status: statuses.RunStatus,
) -> None:
    """A retried run's new state, due now, its error cleared."""
    ops.save_run(
        conn,
        run.id,
        expected_version=run.version,
        state=dict(new_state),
        status=status,
        now=now,
        reason=None,
        error=None,
    )
    ops.set_due(conn, run_id=run.id, due_at=now, tenant=run.tenant)


def redrive(
    mounted: Mounted,
    run_id: int,
    *,
    operator: str,
    reason: str = "",
    tenant: binding.Tenant = None,
    dry_run: bool = False,
) -> None:
    """Make a stuck run due now and free its lease; journaled (with ``reason``, when given)
    and said in the run's history ("olga redrove the run: worker host lost")."""
    with _acting_on(mounted, run_id, tenant, dry_run) as (conn, run, now):
        if run.status in statuses.ENDED:
            raise _refused(f"run {run_id} has ended ({run.status})", "run_ended")
        ops.expire_lease(conn, name=ops.run_lease(run_id), now=now)
        ops.set_due(conn, run_id=run_id, due_at=now, tenant=run.tenant)
        said = {"by": operator, **_given(reason)}
        ops.append_log(conn, run_id=run_id, at=now, what="redriven", detail=said)
        _journal(conn, run, operator, "redrive", now, _given(reason))


def restart(
    mounted: Mounted,
    run_id: int,
    *,
    operator: str,
    reason: str = "",
    tenant: binding.Tenant = None,
    dry_run: bool = False,
) -> int:
    """Start a failed run's flow again, as a new run on the same record; its id. Journaled.

    The new run executes the flow's rows as they are now (a row fixed since the failure
    is picked up), whatever started the old run (a creation, an update, an operator).
    The old run stays failed and points at the new one (``restarted_as``), and its
    history says so. Refused, with a sentence, for a run that has not failed, one
    restarted already, a flow deleted, inactive or broken, and a record deleted. (With
    ``dry_run`` the id is of a run that was rolled back with the rest.)
    """
    with _acting_on(mounted, run_id, tenant, dry_run) as (conn, run, now):
        if run.restarted_as is not None:
            raise _refused(
                f"run {run_id} was already restarted as run {run.restarted_as}", "run_restarted"
            )
        if run.status != statuses.RunStatus.FAILED:
            raise _refused(
                f"run {run_id} has not failed ({run.status}); only a failed run is restarted",
                "run_not_failed",
            )
        new_id, name = program(mounted, run).restarted(mounted, conn, run, operator, now)
        # The run changed since it was read (retried, say): nothing of this restart is kept.
        if not ops.mark_restarted(
            conn, run.id, expected_version=run.version, restarted_as=new_id, now=now
        ):
            raise _refused(
                f"run {run_id} changed while it was being restarted; look at it again",
                "run_changed",
            )
        said = {"by": operator, "restarted_as": new_id, "reason": reason}
        ops.append_log(conn, run_id=run.id, at=now, what="restarted", detail=said)
        detail = {"run": run.id, "restarted_as": new_id, "flow": name, "reason": reason}
        _journal(conn, run, operator, "restart", now, detail)
        return new_id


@contextlib.contextmanager
def _acting_on(
    mounted: Mounted, run_id: int, tenant: binding.Tenant, dry_run: bool = False
) -> Iterator[tuple[sa.Connection, ops.RunRow, datetime]]:
    """The operator's transaction, the run it acts on (``run_for_operator``) and the time.

    With ``dry_run`` the transaction is rolled back once the action went through.
    """
    now = mounted.clock()
    with dialects.begin(mounted.engine) as conn:
        yield conn, run_for_operator(mounted, conn, run_id, tenant), now
        if dry_run:
            conn.rollback()


def _refused(sentence: str, code: str) -> errors.OperatorError:
    """An action that does not apply to the run as it stands (409, with its code)."""
    return errors.OperatorError(sentence, code=code)


def _given(reason: str) -> dict[str, object]:
    """The operator's reason as a journal's (or history line's) detail, when one was given."""
    return {"reason": reason} if reason else {}


def run_for_operator(
    mounted: Mounted, conn: sa.Connection, run_id: int, tenant: binding.Tenant
) -> ops.RunRow:
    """The run, if it is on this runner's resource and of the tenant; else OperatorError."""
    tenant = None if tenant is None else str(tenant)
    try:
        run = ops.load_run(conn, run_id)
    except errors.FlowrunnerError:
        run = None
    if (
        run is None
        or run.resource != mounted.binding.resource
        or (mounted.binding.tenant and run.tenant != tenant)
    ):
        raise errors.OperatorError(f"there is no run {run_id}", status_code=404, code="run_unknown")
    return run


def _journal(
    conn: sa.Connection,
    run: ops.RunRow,
    operator: str,
    action: str,
    now: datetime,
    detail: Mapping[str, object],
) -> None:
    ops.journal(
        conn,
        operator=operator,
        action=action,
        at=now,
        tenant=run.tenant,
        run_id=run.id,
        resource=run.resource,
        record_id=run.record_id,
        detail=dict(detail),
    )


# -- one action on many runs ---------------------------------------------------------


def action_of(action: str | Action) -> Action:
    """The action an operator names, in any case; ``OperatorError`` naming the actions."""
    try:
        return Action(str(action).strip().casefold())
    except ValueError:
        known = ", ".join(Action)
        hint = spelling.did_you_mean(str(action), list(Action))
        raise errors.OperatorError(
            f"there is no action '{action}'{hint} (actions: {known})", code="action_unknown"
        ) from None


def act(
    mounted: Mounted,
    action: str | Action,
    run_ids: Iterable[object],
    *,
    operator: str,
    reason: str = "",
    tenant: binding.Tenant = None,
    dry_run: bool = False,
) -> list[Outcome]:
    """Do ``action`` to each run, each in its own transaction; one ``Outcome`` per run, in
    the order given (a run named twice is acted on once).

    A run the action does not apply to — ended, not failed, another tenant's, unknown —
    is refused with the reason and the rest go on: nothing is all or nothing. Refused
    before anything is done (``OperatorError``): an unknown action, no operator, no
    tenant on a tenant binding, a run id that is not a number. ``dry_run`` does each
    action and rolls it back: the outcomes say what would be done, nothing is kept.
    """
    chosen = action_of(action)
    who = (operator or "").strip()
    if not who:
        raise errors.OperatorError(
            "name the operator: every action is journaled with who did it",
            code="operator_missing",
        )
    owner = mounted.need_tenant(tenant)
    ids: list[int] = []
    for given in run_ids:
        run_id = mounted.run_id(given)
        if run_id not in ids:
            ids.append(run_id)
    return [_act_on(mounted, chosen, run_id, who, reason, owner, dry_run) for run_id in ids]


def _act_on(
    mounted: Mounted,
    action: Action,
    run_id: int,
    operator: str,
    reason: str,
    tenant: object,
    dry_run: bool,
) -> Outcome:
    try:
        new = _do(mounted, action, run_id, operator, reason, tenant, dry_run)
    except errors.OperatorError as exc:
        return Outcome(run_id, action, False, str(exc), exc.code, dry_run=dry_run)
    except errors.LeaseLost:
        # Saved over by a worker or another operator between the read and the write.
        return Outcome(
            run_id,
            action,
            False,
            f"run {run_id} changed while it was being acted on; look at it again",
            "run_changed",
            dry_run=dry_run,
        )
    return Outcome(run_id, action, True, restarted_as=None if dry_run else new, dry_run=dry_run)


def _do(
    mounted: Mounted,
    action: Action,
    run_id: int,
    operator: str,
    reason: str,
    tenant: object,
    dry_run: bool,
) -> int | None:
    args: dict[str, Any] = {
        "operator": operator,
        "reason": reason,
        "tenant": tenant,
        "dry_run": dry_run,
    }
    if action == Action.CANCEL:
        cancel(mounted, run_id, **args)
    elif action == Action.RETRY:
        retry(mounted, run_id, **args)
    elif action == Action.REDRIVE:
        redrive(mounted, run_id, **args)
    else:
        return restart(mounted, run_id, **args)
    return None


def summary(outcomes: Sequence[Outcome]) -> str:
    """``3 done, 1 refused`` (``would be done`` on a dry run)."""
    done = sum(1 for outcome in outcomes if outcome.done)
    dry = any(outcome.dry_run for outcome in outcomes)
    verb = "would be done" if dry else "done"
    return f"{done} {verb}, {len(outcomes) - done} refused"


def program(mounted: Mounted, run: ops.RunRow) -> Program:
    """The run's program; an operator's action on a run of a program this runner does not
    have (its code was removed) takes what every program does (``Program``)."""
    return mounted.programs.get(program_of(run.snapshot)) or _Missing()


class _Missing(Program):
    """A program this runner does not have: the default answer to every action."""

    def step(self, claimed: Claimed) -> Stepping:
        raise NotImplementedError  # the worker fails such a run itself (``Unknown``)
