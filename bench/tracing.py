"""What tracing costs: ``bench/peers.py``'s job (N workflows of five durable steps, each
step a command with its own commit, on a SQLite file with WAL and ``synchronous=FULL``)
without a tracer provider and with an OpenTelemetry SDK one, side by side in one process.

    python bench/tracing.py [--runs 300] [--repeat 5] [--hooks]

The two take turns (off, on, off, on…), each on a fresh file, so the machine's noise
falls on both alike. "on" sets an SDK ``TracerProvider`` exporting in batches to memory
(a span per step and per command attempt) and flushes its last spans inside the timed
part; "off" has OpenTelemetry imported but no provider set — the check flowrunner makes
per step then, a little more than when the process never imported OpenTelemetry
(``bench/peers.py --only flowrunner flowrunner-traced`` measures that, in fresh
processes). Prints steps per second (wall) and CPU milliseconds per step (the process's,
the exporting thread's included), the medians of the repetitions, and the overhead as
the median of the repetitions' side-by-side ratios. ``--hooks`` times the tracing hooks
of one step alone instead: OpenTelemetry never imported, imported with no provider, and
traced.

Needs ``pip install -e '.[traces]'``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

# Beside this script: the job (it puts the repository on the path).
import peer_jobs


def one(runs: int, *, tracing: bool) -> peer_jobs.Measured:
    with tempfile.TemporaryDirectory() as folder:
        return peer_jobs.flowrunner_job(Path(folder), runs, batch=1, tracing=tracing)


def cpu_ms_per_step(measured: peer_jobs.Measured) -> float:
    assert measured.cpu_seconds is not None
    return measured.cpu_seconds * 1000 / (measured.runs * peer_jobs.STEPS)


def hooks_cost(n: int = 20_000) -> float:
    """CPU microseconds the tracing hooks of one step with one command attempt take,
    alone (the process's CPU time: the exporting thread's counts, other processes' not)."""
    from flowrunner.engine import tracing

    began = time.process_time()
    for run_id in range(n):
        with tracing.step(run_id) as step:
            step.about(program="flow", flow="Five steps", record=run_id, tenant=None)
            with step.attempt("command add_one", step="Add", attempt=1) as attempt:
                attempt.ended("ok")
            step.reached("Add")
    return (time.process_time() - began) * 1e6 / n


def hooks() -> None:
    """The hooks' cost in the three states a process can be in."""
    assert not any(m.startswith("opentelemetry") for m in sys.modules)
    absent = hooks_cost()
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    unset = hooks_cost()
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(InMemorySpanExporter()))
    trace.set_tracer_provider(provider)
    on = hooks_cost(5_000)
    provider.shutdown()
    print(
        "the hooks of one step with one command attempt, alone, in CPU time: "
        f"{absent:.2f} µs with OpenTelemetry never imported, {unset:.2f} µs imported with no "
        f"provider set, {on:.0f} µs traced (two spans made and exported)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=300, help="workflows per measurement")
    parser.add_argument("--repeat", type=int, default=5, help="interleaved repetitions")
    parser.add_argument("--hooks", action="store_true", help="the hooks' cost alone, only")
    args = parser.parse_args()
    if args.hooks:
        hooks()  # in a process of its own: it sets a tracer provider for good
        return
    import opentelemetry.sdk.trace  # noqa: F401  (missing: pip install -e '.[traces]')

    print(
        f"{args.runs} workflows of {peer_jobs.STEPS} durable steps per measurement, "
        f"{args.repeat} interleaved repetitions in one process; {os.cpu_count()} cores, "
        f"load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}"
    )
    one(20, tracing=False)  # the first statements compiled, the modules imported
    one(20, tracing=True)
    off: list[peer_jobs.Measured] = []
    on: list[peer_jobs.Measured] = []
    for repetition in range(1, args.repeat + 1):
        off.append(one(args.runs, tracing=False))
        on.append(one(args.runs, tracing=True))
        print(
            f"repetition {repetition}: off {off[-1].steps_per_second:.0f} steps/s "
            f"({cpu_ms_per_step(off[-1]):.2f} ms CPU/step), on {on[-1].steps_per_second:.0f} "
            f"steps/s ({cpu_ms_per_step(on[-1]):.2f} ms CPU/step)"
        )
    print()
    print(f"{'tracing':10} {'steps/s':>8} {'CPU ms/step':>12}")
    for name, measured in (("off", off), ("on", on)):
        rate = statistics.median(m.steps_per_second for m in measured)
        cpu = statistics.median(cpu_ms_per_step(m) for m in measured)
        print(f"{name:10} {rate:8.0f} {cpu:12.2f}")
    slower = statistics.median(
        a.steps_per_second / b.steps_per_second for a, b in zip(off, on, strict=True)
    )
    dearer = statistics.median(
        cpu_ms_per_step(b) / cpu_ms_per_step(a) for a, b in zip(off, on, strict=True)
    )
    print(
        f"\ntraced: {slower - 1:+.1%} wall time per step, {dearer - 1:+.1%} CPU per step "
        "(medians of the side-by-side ratios)"
    )


if __name__ == "__main__":
    main()
