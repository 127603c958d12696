"""One action over everything a filter matches: failed runs grouped by their error, the
count an operator confirms, then the action done in batches, run by run.

``error_groups`` says what failed (and what is stuck) and how often, grouped by the
error the runs keep: ``300 failed: the gateway refused: timeout``. ``count`` is what a
confirmation shows — how many runs the filter matches now, the highest of their ids and
the moment they were counted (a ``Counted``). ``act_on_matching`` then does the action to
those runs a batch at a time, each run in its own transaction and journaled under the
operator's name (``flowrunner.engine.actions``): runs started after the count are left
alone, and so is a run the journal says got the same action since the count — a
confirmation posted twice retries each run once. A run that moved on meanwhile is
refused with its sentence; the others go on.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from flowrunner import binding
from flowrunner.engine import actions
from flowrunner.store import listing

if TYPE_CHECKING:
    from flowrunner.engine.mounted import Mounted
    from flowrunner.store.runs import RunRow

BATCH = 100
"""How many runs are read, then acted on one by one, at a time."""

GROUPS = 20
"""How many error groups are shown, most runs first."""


@dataclass(frozen=True)
class Counted:
    """What an operator confirms: how many runs a filter matched, and when."""

    action: actions.Action
    """The action confirmed."""
    count: int
    """How many runs the filter matched."""
    highest_id: int | None
    """The newest of them (None when none matched): a run started later is not acted on."""
    at: datetime
    """When they were counted: a run given the action since is not given it again."""


@dataclass(frozen=True)
class Acted:
    """What an action over a filter did: each run's outcome, and what was counted."""

    action: actions.Action
    outcomes: list[actions.Outcome] = field(default_factory=list)
    """Each run acted on, done or refused, newest run first."""
    counted: int | None = None
    """How many runs were confirmed (None when no count was confirmed)."""

    @property
    def done(self) -> int:
        return sum(1 for outcome in self.outcomes if outcome.done)

    @property
    def refused(self) -> list[actions.Outcome]:
        return [outcome for outcome in self.outcomes if not outcome.done]

    @property
    def moved_on(self) -> int:
        """Runs counted that no longer matched when their batch came: given the action
        already (the confirmation posted twice), or changed by a worker or an operator."""
        return 0 if self.counted is None else max(0, self.counted - len(self.outcomes))

    @property
    def summary(self) -> str:
        """``300 done, 1 refused`` (and ``, 2 no longer matched`` when some counted did
        not: given the action already, or moved on meanwhile)."""
        said = actions.summary(self.outcomes)
        if self.moved_on:
            said += f", {self.moved_on} no longer matched"
        return said


def error_groups(
    mounted: Mounted, where: listing.RunFilter, *, tenant: object, limit: int = GROUPS
) -> list[listing.ErrorGroup]:
    """The failed and the stuck runs ``where`` keeps (its statuses aside), grouped by their
    error, most runs first."""
    with mounted.engine.connect() as conn:
        return listing.error_groups(
            conn,
            resource=mounted.binding.resource,
            tenant=tenant,
            where=where,
            now=mounted.clock(),
            limit=limit,
        )


def count(
    mounted: Mounted, action: str | actions.Action, where: listing.RunFilter, *, tenant: object
) -> Counted:
    """How many runs ``where`` matches now, for the operator to confirm ``action`` on."""
    chosen = actions.action_of(action)
    now = mounted.clock()
    with mounted.engine.connect() as conn:
        number, highest = listing.count_matching(
            conn, resource=mounted.binding.resource, tenant=tenant, where=where, now=now
        )
    return Counted(chosen, number, highest, now)


def act_on_matching(
    mounted: Mounted,
    counted: Counted,
    where: listing.RunFilter,
    *,
    operator: str,
    reason: str = "",
    tenant: binding.Tenant = None,
    dry_run: bool = False,
    allowed: Callable[[RunRow], str | None] | None = None,
    progress: Callable[[int], None] | None = None,
) -> Acted:
    """Do the counted action to the runs ``where`` matches, a batch at a time (``BATCH``),
    each run in its own transaction, journaled under ``operator``.

    Only runs counted are acted on (none started since), and none the journal says got
    this action since the count. ``allowed(run)`` may refuse a run with a sentence (an
    operator who may not act on it); ``progress(n)`` is told after each batch how many
    runs it held. ``dry_run``: each action done and rolled back, nothing kept.
    """
    owner = mounted.need_tenant(tenant)
    action = counted.action
    if counted.highest_id is None:
        return Acted(action, [], counted.count)
    narrowed = dataclasses.replace(
        where,
        at_most_id=counted.highest_id,
        not_acted=listing.NotActed(str(action), counted.at),
    )
    outcomes: list[actions.Outcome] = []
    before: int | None = None
    while True:
        with mounted.engine.connect() as conn:
            page = listing.find_runs(
                conn,
                resource=mounted.binding.resource,
                tenant=owner,
                where=narrowed,
                now=mounted.clock(),
                before_id=before,
                limit=BATCH,
            )
        refusals: dict[int, actions.Outcome] = {}
        for run in page.rows:
            refusal = None if allowed is None else allowed(run)
            if refusal is not None:
                refusals[run.id] = actions.Outcome(
                    run.id, action, False, refusal, "not_allowed", dry_run=dry_run
                )
        ids = [run.id for run in page.rows if run.id not in refusals]
        done = actions.act(
            mounted, action, ids, operator=operator, reason=reason, tenant=owner, dry_run=dry_run
        )
        by_id = {outcome.run_id: outcome for outcome in done} | refusals
        outcomes.extend(by_id[run.id] for run in page.rows)
        if progress is not None:
            progress(len(page.rows))
        if page.next_before is None:
            return Acted(action, outcomes, counted.count)
        before = page.next_before
