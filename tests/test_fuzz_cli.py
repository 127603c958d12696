"""Fuzzing the operators' command line: ``flowrunner runs`` (list, show, the four actions,
journal, notices), ``diagram``, ``jobs``, ``prune`` and ``console``, every option given
values good and bad — ids past 64 bits, dates, durations, filters, many runs at once —
on a desk whose runs are in every state. Whatever is given, the command exits 0, 1 (a
verdict: an action refused for some run) or 2, and a refusal is one line ``Error: …``;
nothing is ever "unexpected". (``tests/test_fuzz_entry.py`` fuzzes the other commands.)

``console`` is fuzzed up to the moment it would serve: uvicorn's ``run`` is replaced, so
options it accepts end the command at once. Examples follow the hypothesis profile; for
a long run set ``FLOWRUNNER_FUZZ_EXAMPLES`` or run ``python bench/fuzz.py cli``.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import migrated
import pytest
import room
import sqlalchemy as sa
from click.testing import CliRunner
from fuzzing import Tally
from hypothesis import given
from hypothesis import strategies as st
from test_fuzz_console import one_in
from test_fuzz_entry import fuzz

from flowrunner.cli import cli

ROOT = Path(__file__).resolve().parent.parent
TICKETS = "fixtures.tickets.app:runner"
SCHEDULED = "fixtures.purchase_orders.scheduled:runner"

TALLY = Tally("by command and exit status")


# Command-line arguments hold no NUL: the operating system cannot pass one.
WORDS = st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00"), max_size=10)
IDS = st.sampled_from(
    [
        "1",
        "2",
        "3",
        "4",
        "5",
        "6",
        "0",
        "-1",
        "007",
        "+3",
        " 4",
        "1e3",
        "²",
        "٣",
        str(2**31),
        str(2**63 - 1),
        str(2**63),
        "9" * 20,
        "9" * 400,
        "two",
        "",
    ]
)
DURATIONS = st.sampled_from(
    ["2d", "3 hours", "P1W", "1 hour", "30 minutes", "-1 day", "99999999 years", "2 dayz", ""]
)
FLOWS = st.sampled_from(["Listen", "listen", "Quick", "Hand over", "hand  over", "Lisen", ""])
STATUSES = st.sampled_from(["failed", "stuck", "waiting", "running", "done", "faild", "STUCK"])
VALUES = IDS | DURATIONS | FLOWS | STATUSES | WORDS


def maybe(draw: st.DrawFn, option: str, values: st.SearchStrategy[str]) -> list[str]:
    return [option, draw(values)] if draw(st.booleans()) else []


@pytest.fixture
def places(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The desk in a SQLite file (its clock ending now), the purchasing app's database
    for its jobs, and databases that cannot be used; uvicorn never serves."""
    desk = f"sqlite:///{tmp_path / 'desk.db'}"
    engine = sa.create_engine(desk)
    room.desk(engine, start=datetime.now(UTC) - timedelta(days=4, hours=1))
    engine.dispose()
    orders = f"sqlite:///{tmp_path / 'orders.db'}"
    engine = sa.create_engine(orders)
    migrated.upgrade(engine)
    engine.dispose()
    served: list[dict[str, Any]] = []
    monkeypatch.setattr("uvicorn.run", lambda app, **options: served.append(options))
    # The apps import from the repository; an app's own database (no --database) is
    # made in the test's folder, never beside the sources.
    monkeypatch.syspath_prepend(str(ROOT))
    monkeypatch.chdir(tmp_path)
    return {
        "desk": desk,
        "orders": orders,
        "unusable": [
            f"sqlite:///{tmp_path / 'fresh.db'}",
            f"sqlite:///{tmp_path / 'no' / 'dir' / 'x.db'}",
            "nosuchdb://x",
            "not a url",
        ],
        "outputs": [str(tmp_path / "out.html"), "/no/such/dir/x.svg", str(tmp_path)],
        "served": served,
    }


@st.composite
def command_lines(draw: st.DrawFn, places: dict[str, Any]) -> list[str]:
    """One command line of the operators' commands, from pools of good and bad values."""
    desk = ["--app", TICKETS, "--database", places["desk"]]
    where = draw(st.integers(0, 19))
    if where == 7:  # another app, or a database that cannot be used
        desk = [
            "--app",
            draw(st.sampled_from([TICKETS, SCHEDULED, "nocolon", "os:path"]) | WORDS),
            "--database",
            draw(st.sampled_from(places["unusable"])),
        ]
    elif where == 13:
        desk = desk[:2]  # the app's own database: it names none, so it is refused
    tenant = maybe(draw, "--tenant", WORDS)
    json_ = ["--json"] if draw(st.booleans()) else []
    command = draw(
        st.sampled_from(
            ["list", "show", "act", "journal", "notices", "diagram", "jobs", "prune", "console"]
        )
    )
    if command == "list":
        args = ["runs", "list", *desk, *tenant, *json_]
        for _ in range(draw(st.integers(0, 3))):
            args += ["--status", draw(STATUSES | WORDS)]
        args += maybe(draw, "--flow", FLOWS | IDS | WORDS)
        args += maybe(draw, "--record", IDS | WORDS)
        args += maybe(draw, "--older-than", DURATIONS | WORDS)
        args += maybe(draw, "--newer-than", DURATIONS | WORDS)
        args += maybe(draw, "--stuck-after", DURATIONS | WORDS)
        args += maybe(draw, "--limit", IDS | st.sampled_from(["500", "501", "50"]))
        args += maybe(draw, "--before", IDS | WORDS)
        return args
    if command == "show":
        return ["runs", "show", draw(IDS | WORDS), *desk, *tenant, *json_]
    if command == "act":
        action = draw(st.sampled_from(["cancel", "retry", "redrive", "restart"]))
        # Mostly the desk's own runs, so actions are done as well as refused.
        known = st.sampled_from(["1", "2", "3", "4", "5", "6", "7"])
        ids = draw(st.lists(IDS | WORDS if draw(one_in(4)) else known, max_size=6))
        args = ["runs", action, *ids, *desk, *tenant, *json_]
        if not draw(one_in(10)):
            args += ["--operator", draw(st.sampled_from(["olga", " ", "night shift"]) | WORDS)]
        args += maybe(draw, "--reason", WORDS)
        if draw(st.booleans()):
            args.append("--dry-run")
        return args
    if command in ("journal", "notices"):
        args = ["runs", command, *desk, *tenant, *json_]
        args += maybe(draw, "--run", IDS | WORDS)
        args += maybe(draw, "--limit", IDS)
        args += maybe(draw, "--before", IDS | WORDS)
        if command == "journal":
            args += maybe(draw, "--operator", st.sampled_from(["olga", "bob"]) | WORDS)
            args += maybe(draw, "--action", st.sampled_from(["cancel", "START", "x"]) | WORDS)
        else:
            args += maybe(
                draw, "--state", st.sampled_from(["pending", "delivered", "undeliverable", "x"])
            )
        return args
    if command == "diagram":
        args = ["diagram", draw(FLOWS | IDS | WORDS), *desk, *tenant]
        args += maybe(draw, "--run", IDS | WORDS)
        args += maybe(draw, "--format", st.sampled_from(["html", "svg", "mermaid", "png"]))
        args += maybe(draw, "-o", st.sampled_from(places["outputs"]))
        return args
    if command == "jobs":
        jobs = ["--app", SCHEDULED, "--database", places["orders"]] if where < 7 else desk
        if draw(st.booleans()):
            return ["jobs", "list", *jobs, *json_]
        name = draw(st.sampled_from(["nightly_close", "remind_buyer", "nope"]) | WORDS)
        args = ["jobs", "run", name, *jobs, *json_]
        if not draw(one_in(10)):
            args += ["--operator", draw(st.sampled_from(["olga"]) | WORDS)]
        # Never a long wait: a job whose slot no worker takes waits as long as it is told.
        args += maybe(draw, "--wait", st.sampled_from(["0", "0.2", "-1", "x", "nan", "3601"]))
        return args
    if command == "prune":
        args = ["prune", *desk, *json_]
        args += maybe(draw, "--older-than", DURATIONS | st.sampled_from(["90d", "59 minutes"]))
        args += maybe(draw, "--batch", IDS)
        for flag in ("--dry-run", "--include-failed"):
            if draw(st.booleans()):
                args.append(flag)
        return args
    args = ["console", *desk, *tenant]
    if not draw(one_in(4)):  # mostly one reader it can name, so it (almost) serves
        args += ["--token", draw(st.sampled_from(["a-long-enough-token-here", "short"]))]
    else:
        args += maybe(draw, "--token", WORDS)
        args += maybe(draw, "--principal", st.sampled_from(["tests.nowhere:who", "os:sep"]))
    args += maybe(draw, "--host", st.sampled_from(["127.0.0.1", "0.0.0.0", "::1", "localhost"]))
    args += maybe(draw, "--port", IDS | st.sampled_from(["65536", "8000"]))
    args += maybe(draw, "--operator", WORDS)
    args += maybe(draw, "--root-path", st.sampled_from(["/ops", "", "x"]) | WORDS)
    return args


def invoke(args: list[str]) -> tuple[int, str, str]:
    result = CliRunner(env={"COLUMNS": "160", "FLOWRUNNER_CONSOLE_TOKEN": ""}).invoke(cli, args)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"{args}: {result.exception!r}") from result.exception
    return result.exit_code, result.stdout, result.stderr


def judge(args: list[str], code: int, out: str, err: str) -> None:
    """What every command line must come to, whatever it was given."""
    assert code in (0, 1, 2), (args, code, out, err)
    assert "Traceback" not in out + err, (args, out, err)
    assert "Error: unexpected" not in err, (args, err)
    if code == 2 and not err.startswith("Usage: "):  # a group shown its help is no refusal
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("Error: "), (args, err)
    if code == 1:  # a verdict, said on standard output, never an error line
        assert not err.startswith("Error: "), (args, err)


@fuzz(0.5)
@given(data=st.data())
def test_every_operators_command_line(places: dict[str, Any], data: st.DataObject) -> None:
    args = data.draw(command_lines(places))
    code, out, err = invoke(args)
    judge(args, code, out, err)
    TALLY[f"{' '.join(args[:2] if args[0] in ('runs', 'jobs') else args[:1])} exit {code}"] += 1


@pytest.mark.parametrize(
    "args",
    [
        ["diagram", str(2**63), "--app", TICKETS],
        ["runs", "list", "--flow", "9" * 20, "--app", TICKETS],
        ["runs", "journal", "--before", str(2**63), "--app", TICKETS],
        ["runs", "show", "9" * 400, "--app", TICKETS],
        ["runs", "cancel", "2", str(2**63), "--operator", "olga", "--app", TICKETS],
        ["runs", "list", "--limit", "0", "--app", TICKETS],
    ],
)
def test_the_refusals_the_issue_found_are_one_line_and_exit_2(
    places: dict[str, Any], args: list[str]
) -> None:
    code, out, err = invoke([*args, "--database", places["desk"]])
    judge(args, code, out, err)
    assert code == 2 and err.startswith("Error: ")
