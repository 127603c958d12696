"""Fuzzing code workflows' bodies: a body that takes any steps, given anything a Python
caller may pass — names, commands, inputs, targets, lengths, moments, events, matches,
requests — whose commands answer, refuse or fail with anything, and which returns or
raises anything. Each run is done, failed with a sentence, or waiting; the worker
never meets an error it did not expect (``stats.errors``) and nothing escapes it; the
history reads. On SQLite and PostgreSQL, through the test driver's clock.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Generator, Mapping
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from fuzzing import ANYTHING, DURATIONS, MOMENTS, TEXT, VALUES, Tally, fuzz
from hypothesis import given
from hypothesis import strategies as st
from running import mount

from flowrunner import errors, testing
from flowrunner.engine import commands
from flowrunner.foundations import statuses
from flowrunner.workflows import Connection, Manual, Workflows

ENDED_OR_WAITING = {
    statuses.RunStatus.DONE,
    statuses.RunStatus.FAILED,
    statuses.RunStatus.WAITING,
}


@dataclass(frozen=True)
class Step:
    """One step the fuzzed body takes: ``w.<kind>(*args, **options)``, or something
    else a body may do (raise, await what is no step)."""

    kind: str
    args: tuple[Any, ...] = ()
    options: Mapping[str, Any] | None = None
    catch: bool = False


# The scripts the one fuzzed workflow plays, by the number its start names: a body must
# take the same steps on every replay, so it reads them here, never from a draw.
SCRIPTS: dict[int, tuple[list[Step], Any]] = {}
NUMBERS = itertools.count()


def mostly(good: st.SearchStrategy[Any], *odd: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``good`` nine times in ten, else one of ``odd`` (or anything): a script goes on
    past its first steps often enough to reach what comes after."""
    odd_one = st.one_of(*odd, ANYTHING)
    # Drawn by a number, not by one_of's branches: one_of flattens the odd ones in.
    return st.integers(0, 9).flatmap(lambda n: odd_one if n == 0 else good)


NAMES = mostly(st.sampled_from(["a", "b", "c", "d", "e", "a"]), TEXT)
COMMANDS = mostly(st.sampled_from(["answer", "answer", "refuse", "fail", "nope"]), TEXT)
ANSWERS: list[Any] = []  # what the "answer" command answers, in turn


def _raises(payload: Any) -> bool:
    raise ValueError("a match that fails\x00\ud800")


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no words for it")


class NotAStep:
    def __await__(self) -> Generator[Any, Any, Any]:
        return (yield "not a step")


steps = st.one_of(
    st.builds(
        Step,
        st.just("run"),
        st.tuples(NAMES, COMMANDS),
        st.fixed_dictionaries(
            {},
            optional={
                "target": mostly(st.sampled_from([1, "1", 2, "x"])),
                "input": mostly(st.dictionaries(TEXT, VALUES, max_size=3)),
                "outside": st.booleans(),
            },
        ),
        st.booleans(),
    ),
    st.builds(
        Step,
        st.just("sleep"),
        st.tuples(NAMES, mostly(st.sampled_from(["1 hour", "1 day", "PT5M"]), DURATIONS)),
    ),
    st.builds(Step, st.just("until"), st.tuples(NAMES, mostly(MOMENTS, TEXT))),
    st.builds(Step, st.just("now"), st.tuples(NAMES)),
    st.builds(
        Step,
        st.just("wait_for"),
        st.tuples(NAMES, mostly(st.just("ticket.replied"), TEXT)),
        st.fixed_dictionaries(
            {},
            optional={
                "match": st.sampled_from([None, lambda p: True, lambda p: p["x"], _raises]),
                "timeout": mostly(st.sampled_from([None, "1 day"]), DURATIONS),
            },
        ),
        st.booleans(),
    ),
    st.builds(
        Step,
        st.just("call"),
        st.tuples(
            NAMES,
            mostly(st.sampled_from(["nowhere", "unset"]), TEXT),
            st.one_of(
                st.fixed_dictionaries(
                    {},
                    optional={
                        "method": st.one_of(st.sampled_from(["GET", "post", "TRACE"]), ANYTHING),
                        "path": st.one_of(TEXT, ANYTHING),
                        "body": st.one_of(VALUES, ANYTHING),
                        "headers": st.one_of(st.dictionaries(TEXT, TEXT, max_size=2), ANYTHING),
                        "query": st.one_of(st.dictionaries(TEXT, TEXT, max_size=2), ANYTHING),
                    },
                ),
                ANYTHING,
            ),
        ),
        st.fixed_dictionaries({}, optional={"retry": st.one_of(st.none(), VALUES, ANYTHING)}),
        st.booleans(),
    ),
    st.builds(
        Step,
        st.just("raise"),
        st.tuples(
            st.one_of(
                st.builds(ValueError, TEXT),
                st.builds(errors.StepRefused, TEXT),
                st.just(Unprintable()),
                st.just(RecursionError("deep")),
            )
        ),
    ),
    st.builds(Step, st.just("await")),
)


async def fuzzed(w: Any, start: Any) -> Any:
    """Plays the script its start names, then returns what the script says."""
    script, returned = SCRIPTS[start["n"]]
    for step in script:
        if step.kind == "raise":
            raise step.args[0]
        if step.kind == "await":
            await NotAStep()
            continue
        try:
            await getattr(w, step.kind)(*step.args, **dict(step.options or {}))
        except errors.StepRefused:
            if not step.catch:
                raise
    return returned


def answer(ctx: commands.CommandContext) -> Any:
    ctx.conn.execute(sa.text("UPDATE ticket SET priority = 'high' WHERE id = 1"))
    return ANSWERS[0] if ANSWERS else None


def refuse(ctx: commands.CommandContext) -> None:
    raise errors.CommandRefused(str(ctx.inputs.get("why", "no\nway\x00")))


def fail(ctx: commands.CommandContext) -> None:
    raise ConnectionError("the service did not answer\n\ud800")


TALLY = Tally("by how the run was left")


def test_a_workflow_taking_any_steps_ends_fails_or_waits_and_the_worker_goes_on(
    any_engine: sa.Engine,
) -> None:
    workflows = Workflows(connections={"nowhere": Connection("http://127.0.0.1:9/api")})
    workflows.define(start=Manual(), run_as="desk", name="fuzzed")(fuzzed)
    driver = mount(
        any_engine,
        "tickets",
        flows="[]",
        commands={"answer": answer, "refuse": refuse, "fail": fail},
        workflows=workflows,
    )
    driver.create({"id": 1, "title": "Printer on fire", "requester_id": "ann"}, run=False)
    seen: dict[str, int] = {}

    @fuzz(0.5)
    @given(
        script=st.lists(steps, max_size=6),
        returned=mostly(st.dictionaries(TEXT, VALUES, max_size=2), VALUES),
        answered=mostly(st.dictionaries(TEXT, VALUES, max_size=2), VALUES),
        events=st.lists(st.dictionaries(TEXT, VALUES, max_size=2), max_size=2),
    )
    def play(script: list[Step], returned: Any, answered: Any, events: list[Any]) -> None:
        number, errors_before = next(NUMBERS), driver.worker.stats.errors
        SCRIPTS[number] = (script, returned)
        ANSWERS[:] = [answered]
        run_id = driver.runner.start_workflow("fuzzed", {"n": number}, operator="fuzz", record=1)
        _play(driver, events)
        run = driver.runner.get_run(run_id)
        seen[run.status] = seen.get(run.status, 0) + 1
        TALLY[f"run {run.status}"] += 1
        assert run.status in ENDED_OR_WAITING, (run.status, run.reason)
        if run.status == statuses.RunStatus.FAILED:
            assert run.reason and "\n" not in run.reason, run.reason
        assert all(isinstance(line.sentence, str) for line in driver.history(run_id))
        assert driver.worker.stats.errors == errors_before, "the worker met an unexpected error"
        if run.status == statuses.RunStatus.WAITING:
            # Cancelled, so that the runs left waiting do not pile up on the record.
            driver.runner.cancel(run_id, operator="fuzz")
            driver.run_until_idle()
            assert driver.runner.get_run(run_id).status == statuses.RunStatus.CANCELLED
            assert driver.worker.stats.errors == errors_before, "the worker met an unexpected error"

    play()
    assert set(seen) & {statuses.RunStatus.DONE, statuses.RunStatus.FAILED}, seen


def _play(driver: testing.FlowDriver, events: list[Any]) -> None:
    """Run what is due, send the events, then let the clock go on: retries, timers."""
    driver.run_until_idle()
    for payload in events:
        # A payload the store cannot keep is refused, as emit's own fuzz shows.
        with contextlib.suppress(errors.EventRejected):
            driver.emit("ticket.replied", {**payload, "ticket": 1})
    for _ in range(3):
        driver.advance("2 days")
