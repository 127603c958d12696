"""A worker's metrics in Prometheus's text format, and its health, over HTTP.

``flowrunner worker --metrics-port N`` serves three paths:

- ``/metrics``: what the worker did since it started (claims, runs advanced and failed,
  leases lost, claims handed back, wake-ups, database failures), how long steps and
  commands took (histograms), command failures and retries — gathered from the worker's
  own counts — and, read from the database at each scrape with a few cheap statements
  (``store.gauges``), the runner's runs by flow and status, the runs due and the age of
  the oldest one, the notices waiting and those that cannot be delivered;
- ``/healthz``: 200 while the process answers (alive);
- ``/readyz``: 200 when the database answers, grants a writing transaction (as a claim
  needs) within two seconds, and its schema is current (``migrate.ensure_current``);
  503 with the reason otherwise.

It needs ``prometheus_client`` (``pip install 'flowrunner[metrics]'``), imported only
when metrics are asked for: a worker without them costs nothing. Each ``Metrics`` has a
registry of its own, never the process's global one.
"""

from __future__ import annotations

import http.server
import sys
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from flowrunner.foundations import extras, logs, sanitize
from flowrunner.store import gauges, migrate

if TYPE_CHECKING:
    from flowrunner.engine.worker import Worker

log = logs.logger("flowrunner.engine.metrics")

# Step and command durations, in seconds: from a quick set step to a slow call.
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)

# The worker's own counts (``WorkerStats``), each as a counter: its name and help.
COUNTERS = {
    "claimed": ("flowrunner_worker_claimed_runs", "Runs this worker claimed."),
    "advanced": ("flowrunner_worker_advanced_runs", "Runs this worker advanced."),
    "failed": ("flowrunner_worker_failed_runs", "Runs this worker advanced into failure."),
    "refused": (
        "flowrunner_worker_leases_lost",
        "Runs whose lease another worker took over before this one saved (write refused).",
    ),
    "errors": ("flowrunner_worker_errors", "Runs not advanced for an error of the engine."),
    "handed_back": (
        "flowrunner_worker_handed_back_runs",
        "Claimed runs handed back not started (a stop, a lost connection).",
    ),
    "database_failures": (
        "flowrunner_worker_database_failures",
        "Rounds in which the worker's database failed.",
    ),
    "wakeups": ("flowrunner_worker_wakeups", "Idle rests ended early by a wake-up (LISTEN)."),
    "deferred": (
        "flowrunner_worker_limit_waits",
        "Runs put back to wait for a turn of their command's limit (concurrency, rate).",
    ),
}

PROMETHEUS = "prometheus_client"
WHAT = "flowrunner worker --metrics-port"
# How often the metrics' server looks whether it is asked to stop.
_STOP_POLL_SECONDS = 0.05


def available() -> None:
    """Raise ``errors.ExtraMissing`` (one line naming the ``metrics`` extra) unless
    ``prometheus_client`` can be imported."""
    extras.require(PROMETHEUS, what=WHAT)


class Metrics:
    """The metrics of one ``Worker``: its timings hooked in, its counts and the database's
    gauges gathered at each scrape."""

    def __init__(self, worker: Worker) -> None:
        client: Any = extras.require(PROMETHEUS, what=WHAT)
        self.worker = worker
        self.registry = client.CollectorRegistry(auto_describe=False)
        self.client = client
        self.core: Any = extras.require(f"{PROMETHEUS}.core", what=WHAT)
        self.steps = client.Histogram(
            "flowrunner_step_seconds",
            "How long a claimed run's step took, by the run's program.",
            ["program"],
            buckets=BUCKETS,
            registry=self.registry,
        )
        self.commands = client.Histogram(
            "flowrunner_command_seconds",
            "How long a command attempt took, by command and outcome (ok, failed, refused).",
            ["command", "outcome"],
            buckets=BUCKETS,
            registry=self.registry,
        )
        self.command_failures = client.Counter(
            "flowrunner_command_failures",
            "Command attempts that failed (retried by the kind's policy) or were refused.",
            ["command", "outcome"],
            registry=self.registry,
        )
        self.command_retries = client.Counter(
            "flowrunner_command_retries",
            "Command attempts after the first (retries).",
            ["command"],
            registry=self.registry,
        )
        self.registry.register(_Gathered(self))
        worker.on_step = self._step
        worker.on_command = self._command

    def _step(self, program: str, seconds: float) -> None:
        self.steps.labels(program=program).observe(seconds)

    def _command(self, command: str, seconds: float, outcome: str, attempt: int) -> None:
        self.commands.labels(command=command, outcome=outcome).observe(seconds)
        if outcome != "ok":
            self.command_failures.labels(command=command, outcome=outcome).inc()
        if attempt > 1:
            self.command_retries.labels(command=command).inc()

    def exposition(self) -> bytes:
        """The metrics in Prometheus's text format, gathered now."""
        text: bytes = self.client.generate_latest(self.registry)
        return text

    def ready(self) -> str | None:
        """None when the database answers and its schema is current; else why not."""
        engine = self.worker.mounted.engine
        try:
            gauges.writable(engine)
            migrate.ensure_current(engine)
        except Exception as exc:
            return sanitize.describe_exception(exc)
        return None

    def serve(self, port: int, host: str = "127.0.0.1") -> Serving:
        """Serve ``/metrics``, ``/healthz`` and ``/readyz`` on ``host:port`` in a thread
        (port 0: any free one, ``Serving.port`` says which) until ``Serving.close``."""
        return Serving(self, host, port)


class _Gathered:
    """The counts gathered at each scrape: the worker's, then the database's."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterator[Any]:
        core = self.metrics.core
        stats = self.metrics.worker.stats
        for field, (name, text) in COUNTERS.items():
            family = core.CounterMetricFamily(name, text)
            family.add_metric([], float(getattr(stats, field)))
            yield family
        mounted = self.metrics.worker.mounted
        up = core.GaugeMetricFamily(
            "flowrunner_database_up", "1 when this scrape could read the database, else 0."
        )
        try:
            with gauges.scraping(mounted.engine) as conn:
                read = gauges.read(conn, resource=mounted.binding.resource, now=mounted.clock())
        except Exception as exc:
            log.warning("metrics: the database could not be read (%s)", exc.__class__.__name__)
            up.add_metric([], 0.0)
            yield up
            return
        up.add_metric([], 1.0)
        yield up
        runs = core.GaugeMetricFamily(
            "flowrunner_runs",
            "Runs of this runner by program, flow and status.",
            labels=["program", "flow", "status"],
        )
        counted: dict[tuple[str, str, str], int] = {}
        for (flow_id, flow, status), count in read.runs.items():
            # Another program's runs keep "program:name" as their flow id (job:nightly).
            prefix = flow_id.partition(":")[0]
            key = (prefix if prefix in mounted.programs else "flow", flow, status)
            counted[key] = counted.get(key, 0) + count
        for labels, count in sorted(counted.items()):
            runs.add_metric(list(labels), float(count))
        yield runs
        for name, text, value in (
            ("flowrunner_due_runs", "Runs due now and not claimed.", read.due),
            (
                "flowrunner_oldest_due_run_age_seconds",
                "How long the oldest run due and not claimed has waited (0: none waits).",
                read.oldest_due_seconds,
            ),
            ("flowrunner_notices_waiting", "Notices not delivered yet.", read.notices_waiting),
            (
                "flowrunner_notices_failed",
                "Notices that cannot be delivered: no recipient, or every attempt failed.",
                read.notices_failed,
            ),
        ):
            gauge = core.GaugeMetricFamily(name, text)
            gauge.add_metric([], float(value))
            yield gauge


class Serving:
    """The metrics' HTTP server, answering in a daemon thread."""

    def __init__(self, metrics: Metrics, host: str, port: int) -> None:
        handler = type("Handler", (_Handler,), {"metrics": metrics})
        self.server = _Server((host, port), handler)
        self.port: int = self.server.server_address[1]
        # Polled for a stop every 50 ms, so a worker stopping is not held up half a second
        # (serve_forever's default).
        self.thread = threading.Thread(
            target=self.server.serve_forever, args=(_STOP_POLL_SECONDS,), daemon=True
        )
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


class _Server(http.server.ThreadingHTTPServer):
    """The metrics' server, whose failures are log lines like the worker's own.

    A scraper or a health check that hangs up before its answer is sent (its timeout
    passed) is routine: one debug line. Anything else is a warning of one line. Never
    the traceback ``socketserver`` prints by default, which would break the worker's log
    (``--log-format json``: every line one JSON object).
    """

    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        failure = sys.exc_info()[1]
        client = client_address[0] if isinstance(client_address, tuple) else client_address
        if isinstance(failure, ConnectionError):
            log.debug("metrics: %s hung up before its answer was sent", client)
            return
        said = "no exception" if failure is None else sanitize.describe_exception(failure)
        log.warning("metrics: a request from %s failed: %s", client, said)


class _Handler(http.server.BaseHTTPRequestHandler):
    metrics: Metrics

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            self._answer(200, self.metrics.exposition(), self.metrics.client.CONTENT_TYPE_LATEST)
        elif path == "/healthz":
            self._answer(200, b"alive\n")
        elif path == "/readyz":
            why = self.metrics.ready()
            if why is None:
                self._answer(200, b"ready\n")
            else:
                self._answer(503, f"not ready: {why}\n".encode())
        else:
            self._answer(404, b"not found: /metrics, /healthz or /readyz\n")

    def _answer(self, status: int, body: bytes, kind: str = "text/plain; charset=utf-8") -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("metrics: " + format, *args)
