"""Traces: an OpenTelemetry span for each step a worker takes, a child span for each
command attempt and each call a code workflow makes, and the W3C ``traceparent`` header
that call sends.

The only module that imports OpenTelemetry (``pip install 'flowrunner[traces]'``).
flowrunner never configures it: the application does, as it does for its own spans
(``trace.set_tracer_provider(TracerProvider(...))``, or ``opentelemetry-instrument``).
Until it has — OpenTelemetry not imported by the process, or no SDK tracer provider set
— every hook here is a shared object that does nothing, and flowrunner imports nothing
of OpenTelemetry: a worker without traces pays a dictionary look-up per step.

A span says what it is about in attributes (``flowrunner.run_id``, ``flowrunner.program``,
``flowrunner.flow``, ``flowrunner.step``, ``flowrunner.record``, ``flowrunner.tenant``,
``flowrunner.attempt``...). An error is recorded as its sanitized sentence (one line,
secrets masked: ``foundations.sanitize``), never as the exception with its raw text and
traceback.
"""

from __future__ import annotations

import importlib.metadata
import sys
from collections.abc import Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Self

from flowrunner.foundations import sanitize

if TYPE_CHECKING:
    from contextvars import Token

    from opentelemetry import trace as otel
    from opentelemetry.context import Context
    from opentelemetry.util import types as otel_types

# The instrumentation scope the spans are made under.
SCOPE = "flowrunner"
# The module whose presence says the process may trace: the API's, which the
# application imported to set its tracer provider.
API = "opentelemetry.trace"

# The provider last asked and the tracer it gave (the provider may be set late).
_made: tuple[object, otel.Tracer] | None = None


def tracer() -> otel.Tracer | None:
    """The tracer of the application's tracer provider, or None when nothing is traced:
    OpenTelemetry not imported, or no SDK provider set (only the API's stand-in)."""
    global _made
    if API not in sys.modules:
        return None
    from opentelemetry import trace

    provider = trace.get_tracer_provider()
    made = _made
    if made is not None and made[0] is provider:
        return made[1]
    if isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
        return None
    made = (provider, provider.get_tracer(SCOPE, _version()))
    _made = made
    return made[1]


def _version() -> str | None:
    try:
        return importlib.metadata.version("flowrunner")
    except importlib.metadata.PackageNotFoundError:
        return None  # a source tree not installed


def headers() -> dict[str, str]:
    """The trace context of the current span as HTTP headers (W3C ``traceparent``, and
    ``tracestate``/``baggage`` when there are), by the application's propagators; none
    when nothing is traced."""
    if tracer() is None:
        return {}
    from opentelemetry import propagate

    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier


# -- spans ------------------------------------------------------------------------------


class _Quiet:
    """A span that is not one: ``with`` it does nothing."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        return None


class Attempt(_Quiet):
    """The span of one command attempt or call (this one: nothing is traced)."""

    def ended(self, outcome: str, error: Mapping[str, object] | None = None) -> None:
        """How the attempt ended (``ok``, ``failed``, ``refused``...) and, when it did not
        answer, its error envelope (``code``, ``message``)."""


class Step(_Quiet):
    """The span of one step a worker takes (this one: nothing is traced)."""

    def about(self, *, program: str, flow: str, record: object, tenant: str | None) -> None:
        """What the claimed run is: its program, flow (or job, workflow...), record and
        tenant."""

    def reached(self, step: str | None) -> None:
        """The step took the run through ``step`` (a step's title, a workflow's step)."""

    def failed(self, sentence: str | None) -> None:
        """The step failed the run, for the reason ``sentence`` (None: it did not)."""

    def attempt(
        self, what: str, *, step: str | None, attempt: int, extra: Mapping[str, str] | None = None
    ) -> Attempt:
        """A child span for one attempt of ``what`` (``command send_purchase_order``,
        ``call payments``) at ``step``, its ``attempt``-th."""
        return QUIET_ATTEMPT


QUIET_STEP = Step()
QUIET_ATTEMPT = Attempt()


def step(run_id: int) -> Step:
    """The span of the step a worker takes on run ``run_id``: ``with`` it around the step.

    Until ``about`` names the run's program and flow it is called ``flowrunner step``."""
    traced = tracer()
    if traced is None:
        return QUIET_STEP
    return _Step(traced, run_id)


class _Span:
    """An OpenTelemetry span, current while its ``with`` lasts; an exception that leaves
    it is recorded as its sanitized sentence."""

    def __init__(
        self,
        traced: otel.Tracer,
        name: str,
        attributes: dict[str, otel_types.AttributeValue],
        *,
        client: bool = False,
    ) -> None:
        from opentelemetry import trace

        kind = trace.SpanKind.CLIENT if client else trace.SpanKind.INTERNAL
        self.span = traced.start_span(
            name,
            kind=kind,
            attributes=attributes,
            record_exception=False,
            set_status_on_exception=False,
        )
        self._token: Token[Context] | None = None

    def enter(self) -> None:
        from opentelemetry import context, trace

        self._token = context.attach(trace.set_span_in_context(self.span))

    def exit(self, exc: BaseException | None) -> None:
        from opentelemetry import context

        try:
            if exc is not None:
                self.error(type(exc).__name__, sanitize.describe_exception(exc))
        finally:
            if self._token is not None:
                context.detach(self._token)
            self.span.end()

    def error(self, code: str, sentence: str) -> None:
        """Mark the span failed, with the sentence (masked again: it may come from far)."""
        from opentelemetry import trace

        said = sanitize.sanitize_text(sentence)
        self.span.set_status(trace.Status(trace.StatusCode.ERROR, said))
        self.span.add_event("exception", {"exception.type": code, "exception.message": said})


class _Step(Step):
    def __init__(self, traced: otel.Tracer, run_id: int) -> None:
        self.tracer = traced
        self.common: dict[str, otel_types.AttributeValue] = {"flowrunner.run_id": run_id}
        self.span = _Span(traced, "flowrunner step", dict(self.common))
        self.steps: list[str] = []
        self.failure: str | None = None

    def __enter__(self) -> Self:
        self.span.enter()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        span = self.span.span
        if self.steps:
            span.set_attribute("flowrunner.step", self.steps[-1])
            span.set_attribute("flowrunner.steps", list(self.steps))
        if exc is None and self.failure is not None:
            self.span.error("run_failed", self.failure)
        self.span.exit(exc)

    def about(self, *, program: str, flow: str, record: object, tenant: str | None) -> None:
        self.common["flowrunner.program"] = program
        self.common["flowrunner.flow"] = flow
        self.common["flowrunner.record"] = str(record)
        if tenant is not None:
            self.common["flowrunner.tenant"] = str(tenant)
        self.span.span.set_attributes(self.common)
        self.span.span.update_name(f"{program} {flow}")

    def reached(self, step: str | None) -> None:
        if step:
            if step in self.steps:  # the step's lines come after its command's
                self.steps.remove(step)
            self.steps.append(step)

    def failed(self, sentence: str | None) -> None:
        self.failure = sentence

    def attempt(
        self, what: str, *, step: str | None, attempt: int, extra: Mapping[str, str] | None = None
    ) -> Attempt:
        self.reached(step)
        attributes = {**self.common, "flowrunner.attempt": attempt, **(extra or {})}
        if step:
            attributes["flowrunner.step"] = step
        return _Attempt(self.tracer, what, attributes, client=what.startswith("call "))


class _Attempt(Attempt):
    def __init__(
        self,
        traced: otel.Tracer,
        name: str,
        attributes: dict[str, otel_types.AttributeValue],
        *,
        client: bool,
    ) -> None:
        self.span = _Span(traced, name, attributes, client=client)

    def __enter__(self) -> Self:
        self.span.enter()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.span.exit(exc)

    def ended(self, outcome: str, error: Mapping[str, object] | None = None) -> None:
        self.span.span.set_attribute("flowrunner.outcome", outcome)
        if error is not None:
            code = str(error.get("code") or outcome)
            self.span.error(code, str(error.get("message") or outcome))
