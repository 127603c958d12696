"""``flowrunner deliver``: the notices due for delivery sent through the binding's
channels, until stopped or (``--once``) until nothing is due now.

Each attempt is a log line on standard error (``flowrunner.foundations.logs``); the
summary goes to standard output (``--json``: one JSON document). ``flowrunner worker
--deliver`` runs the same deliverer beside the worker, in one process.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING

import click

from flowrunner import cli as cli_mod

if TYPE_CHECKING:
    from flowrunner.delivery import deliverer as deliverer_mod

LOG_LEVELS = ("debug", "info", "warning", "error")


@click.command(epilog=cli_mod.EXIT_STATUSES)
@cli_mod.app_option()
@cli_mod.jobs_option()
@cli_mod.database_option()
@click.option(
    "--poll",
    default=1.0,
    show_default=True,
    type=click.FloatRange(min=0.01, max=3600),
    help="Seconds to rest when nothing is due.",
)
@click.option(
    "--batch",
    default=10,
    show_default=True,
    type=click.IntRange(min=1),
    help="Notices claimed at a time.",
)
@click.option("--once", is_flag=True, help="Send what is due now, then exit.")
@click.option(
    "--log-level",
    type=click.Choice(LOG_LEVELS, case_sensitive=False),
    default="info",
    show_default=True,
    help="The least a log line must matter to be written: INFO shows each notice sent, "
    "ERROR only those that failed for good.",
)
@cli_mod.log_format_option()
@cli_mod.json_option(
    'Print the summary as one JSON document: {"resource", "claimed", "sent", "retried", '
    '"failed", "handed_back", "seconds"}.'
)
def deliver(
    app_spec: str,
    jobs_spec: str | None,
    database: str | None,
    poll: float,
    batch: int,
    once: bool,
    log_level: str,
    log_format: str,
    as_json: bool,
) -> None:
    """Send the app's notices through its channels until stopped (SIGTERM or Ctrl-C).

    Each notice whose notify rule names a channel is sent at least once, as the same
    message every time (its Message-ID, its Idempotency-Key); a failed attempt is tried
    again after the binding's backoff, and after the last attempt the notice has failed
    for good — the console's notices page shows it, and sends it again on an operator's
    retry. Several deliverers may serve one database: a notice is claimed by one at a
    time. Stopped, it sends the notice in hand, hands back those it claimed but did not
    send (due again at once), prints its summary and exits 0.
    """
    from flowrunner.delivery import deliverer as deliverer_mod
    from flowrunner.foundations import logs
    from flowrunner.runner import FlowRunner

    say = cli_mod.teller(log_format)
    with logs.to_stderr(log_level.upper(), log_format):
        runner = cli_mod.load_runner(app_spec, database)
        assert isinstance(runner, FlowRunner)
        cli_mod.mount_jobs(runner, jobs_spec)
        if not runner.binding.channels:
            raise cli_mod.InputError(
                "the binding names no channels: give it channels= and name one in each "
                "notify rule's channel (see docs/notices.md)"
            )
        serving = deliverer_mod.Deliverer(runner, batch=batch)
        began = time.monotonic()
        if once:
            serving.deliver_all()
            summary(runner.binding.resource, serving, time.monotonic() - began, as_json)
            return
        stop = threading.Event()
        stopping(stop, say, "the notice in hand")
        say(f"delivering the notices of {runner.binding.resource}")
        serving.serve(stop, poll=poll)
        say("deliverer stopped")
        summary(runner.binding.resource, serving, time.monotonic() - began, as_json)


def stopping(stop: threading.Event, say: Callable[[str], None], in_hand: str) -> None:
    """SIGTERM and Ctrl-C set ``stop``; a second one stops the process at once."""

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        if stop.is_set():
            say(f"received signal {signum} again; stopping at once")
            sys.stdout.flush()
            sys.stderr.flush()
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
        say(f"received signal {signum}; finishing {in_hand}, then stopping")
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)


def summary(resource: str, serving: deliverer_mod.Deliverer, took: float, as_json: bool) -> None:
    """What the deliverer did: one line, or one JSON document, on standard output."""
    stats = serving.stats
    if as_json:
        cli_mod.echo_json(
            {
                "resource": resource,
                "claimed": stats.claimed,
                "sent": stats.sent,
                "retried": stats.retried,
                "failed": stats.failed,
                "handed_back": stats.handed_back,
                "seconds": round(took, 3),
            }
        )
        return
    click.echo(
        f"sent {stats.sent} notice(s) of {stats.claimed} claimed; {stats.retried} to try "
        f"again, {stats.failed} failed for good, {stats.handed_back} handed back, "
        f"in {took:.2f} s"
    )
