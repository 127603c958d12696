"""What the console asks of a runner: ``ConsoleRunner``.

The console is a surface above the runner; it depends on this view, not on the facade's
module, so the facade can build it (``runner.console(...)``) without the two importing
each other. ``FlowRunner`` is one: its context (``mounted``), its flow editor
(``editor``), its operations (``operations``), its flows' versions (``publishing``)
and the few calls of its own that a page
makes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Protocol, Unpack

import sqlalchemy as sa

from flowrunner.binding import FlowBinding, RecordId, Tenant
from flowrunner.engine.answer_links import AnswerLinks
from flowrunner.engine.mounted import Clock, Mounted
from flowrunner.engine.operations import Operations, RunFilters, RunQuery
from flowrunner.flows import column_facts
from flowrunner.flows.editor import FlowEditor
from flowrunner.flows.interpreter import config as config_mod
from flowrunner.flows.publishing import Publishing
from flowrunner.flows.trial import result, script
from flowrunner.inbound import asgi
from flowrunner.store import app_tables, listing


class ConsoleRunner(Protocol):
    """The runner a console serves."""

    @property
    def mounted(self) -> Mounted: ...
    @property
    def binding(self) -> FlowBinding: ...
    @property
    def engine(self) -> sa.Engine: ...
    @property
    def tables(self) -> app_tables.AppTables: ...
    @property
    def columns(self) -> column_facts.ResourceColumns: ...
    @property
    def config(self) -> config_mod.InterpreterConfig: ...
    @property
    def clock(self) -> Clock: ...
    @property
    def editor(self) -> FlowEditor: ...
    @property
    def operations(self) -> Operations: ...
    @property
    def publishing(self) -> Publishing: ...
    @property
    def answers(self) -> AnswerLinks: ...

    def try_flow(
        self,
        flow: Mapping[str, Any] | str | int,
        steps: Sequence[Mapping[str, Any]] | None,
        record_id: RecordId,
        *,
        answers: str | Sequence[script.Item | str | None] = (),
        until: str | timedelta = "30 days",
        tenant: Tenant = None,
        start: datetime | None = None,
    ) -> result.TryResult: ...

    def start(
        self, flow: str | int, record_id: RecordId, *, operator: str, tenant: Tenant = None
    ) -> int: ...

    def list_runs(
        self,
        query: RunQuery | None = None,
        *,
        tenant: Tenant = None,
        before_id: object = None,
        limit: object = ...,
        **filters: Unpack[RunFilters],
    ) -> listing.RunPage: ...

    def count_runs(
        self, query: RunQuery | None = None, *, tenant: Tenant = None, **filters: Unpack[RunFilters]
    ) -> dict[str, int]: ...

    def inbound_app(self) -> asgi.InboundApp: ...
