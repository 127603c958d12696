"""What the interpreter knows about the application: its columns, kinds, events and limits.

The runner builds one ``InterpreterConfig`` from the binding; the interpreter reads it and
nothing else about the application, so it stays pure and testable without a database.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta, tzinfo

from flowrunner import query
from flowrunner.calendars import Calendar
from flowrunner.foundations.retry_policy import RetryPolicy
from flowrunner.foundations.shapes import StepKind


@dataclass(frozen=True)
class KindConfig:
    """An application kind of step: the command it runs and what it then waits for.

    ``retry`` is the kind's own policy for its failing command (None: the runner's);
    ``timeout`` the time one attempt of its commands may take (None: no limit).
    ``by`` is the event field naming who answered (modes then count distinct
    answerers); ``cancel`` the command run once when a waiting step stops waiting
    for any reason but its answers. ``outside`` says its commands may reach outside
    the database (an email, an API): each then has a checkpoint of its own.
    """

    name: str
    command: str
    inputs: tuple[str, ...] = ()
    wait_for: str | None = None
    remind: str | None = None
    retry: RetryPolicy | None = None
    timeout: timedelta | None = None
    by: str | None = None
    cancel: str | None = None
    outside: bool = True


@dataclass(frozen=True)
class NotifyConfig:
    """A notify rule: whom a notify step's ``audience`` reaches, and the notice's title.

    ``to`` is the record's column holding the recipient (an address or a user id);
    ``title`` a safe template over the record's columns and ``{message}``.
    """

    audience: str
    to: str
    title: str = "{message}"
    email: bool = False


@dataclass(frozen=True)
class InterpreterConfig:
    """Everything about the binding the interpreter needs (built by the runner).

    ``columns`` are the resource's columns and their types; ``events`` maps an event
    name to the payload field naming the record; ``notify`` holds the notify rules by
    audience; ``max_moves`` bounds the positions a run may enter (a loop guard);
    ``timezone`` is the wall clock that day arithmetic follows; ``calendar`` the one
    business time (``2 business days``) is counted on for this run — its flow's, its
    tenant's or the binding's, with the holidays the application keeps (None: no
    calendar applies, and a business duration breaks its step).
    """

    columns: Mapping[str, query.ColumnType] = field(default_factory=dict)
    kinds: Mapping[StepKind, KindConfig] = field(default_factory=dict)
    events: Mapping[str, str] = field(default_factory=dict)
    notify: Mapping[str, NotifyConfig] = field(default_factory=dict)
    set_columns: frozenset[str] = frozenset()
    max_moves: int = 1000
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    timezone: tzinfo | None = None
    calendar: Calendar | None = None

    @property
    def audiences(self) -> frozenset[str]:
        """The audiences a notify step may name."""
        return frozenset(self.notify)

    def retry_for(self, kind: StepKind) -> RetryPolicy:
        """The retry policy of ``kind``'s command: the kind's own, else the runner's."""
        own = self.kinds.get(kind)
        return own.retry if own is not None and own.retry is not None else self.retry
