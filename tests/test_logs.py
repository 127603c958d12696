"""flowrunner's log lines: one sanitized line each, whoever handles them — and through the
real worker, no secret in its logs, a run's error envelope or its history."""

from __future__ import annotations

import dataclasses
import io
import json
import logging
import re
import warnings
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from running import T0, app, mount

import flowrunner
from flowrunner import FlowBinding, Kind, RetryPolicy
from flowrunner.engine import commands, worker
from flowrunner.foundations import logs

URL = "postgresql://app:S3cr3tPw/x@q@db.internal:5432/orders"
BEARER = "b3ar3rT0kenQZ81"
API_KEY = "k3yValueZZ7741"
NOTE = "Q7X2 private note"  # a record's value: no secret shape, so only leaving it out helps
SECRETS = ("S3cr3tPw", "x@q", BEARER, API_KEY, "Q7X2")

LEAKY = (
    f"could not reach {URL}\nAuthorization: Bearer {BEARER}\n"
    f"  api_key={API_KEY}\nTraceback (most recent call last):\n  forged line"
)


@pytest.fixture
def user_handler() -> Iterator[io.StringIO]:
    """An application's own handler on the package's top logger, with a plain formatter."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s %(message)s"))
    top = logging.getLogger("flowrunner")
    top.addHandler(handler)
    level = top.level
    top.setLevel(logging.DEBUG)
    try:
        yield out
    finally:
        top.removeHandler(handler)
        top.setLevel(level)


# -- the filter ---------------------------------------------------------------------------


def test_a_users_handler_gets_one_sanitized_line_without_a_traceback(
    user_handler: io.StringIO,
) -> None:
    log = logs.logger("flowrunner.test_logs")
    try:
        raise RuntimeError(LEAKY)
    except RuntimeError:
        log.exception("run %s failed:\n%s", 7, f"token={API_KEY}", stack_info=True)
    written = user_handler.getvalue()
    assert written.count("\n") == 1  # the handler's own line end, nothing else
    assert written == (
        "ERROR flowrunner.test_logs run 7 failed: token=[redacted]: RuntimeError: could not "
        "reach postgresql://app:[redacted]@db.internal:5432/orders Authorization: [redacted] "
        "api_key=[redacted] Traceback (most recent call last): forged line\n"
    )


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_a_command_writes_every_record_as_one_line_warnings_and_other_libraries_too(
    log_format: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """What a command writes on standard error while it runs: a library's warning, and a
    record of a logger that is not flowrunner's with a line break, a secret and an
    exception — one line each, masked, without a traceback or a source line."""
    with logs.to_stderr("INFO", log_format), warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.warn(f"the driver is old\nupgrade it ({log_format})", stacklevel=1)
        try:
            raise ValueError(LEAKY)
        except ValueError:
            logging.getLogger("some.library").exception("first line\nsecond line")
        logging.getLogger("some.library").info("where it is", stack_info=True)
    written = capsys.readouterr().err.splitlines()
    assert len(written) == 3, written
    if log_format == "json":
        messages = [json.loads(line)["message"] for line in written]
        assert [json.loads(line)["logger"] for line in written] == [
            "py.warnings",
            *2 * ["some.library"],
        ]
    else:
        messages = [line.split(" ", 4)[4] for line in written]
    assert re.fullmatch(
        rf".*test_logs\.py:\d+: UserWarning: the driver is old upgrade it \({log_format}\)",
        messages[0],
    ), messages[0]
    assert messages[1].startswith("first line second line: ValueError: could not reach")
    assert messages[2] == "where it is"
    for secret in SECRETS:
        assert secret not in "".join(written)
    # Neither a frame of a traceback or of the stack, nor the warning's source line.
    assert not any(shown in "".join(written) for shown in ('File "', "Stack (", "warnings.warn"))


def test_python_shows_its_warnings_again_after_a_command(
    capsys: pytest.CaptureFixture[str],
) -> None:
    before = warnings.showwarning
    with logs.to_stderr("INFO"):
        assert warnings.showwarning is not before
    assert warnings.showwarning is before


def test_values_given_with_extra_are_masked(caplog: pytest.LogCaptureFixture) -> None:
    log = logs.logger("flowrunner.test_logs")
    with caplog.at_level(logging.INFO, logger="flowrunner"):
        log.info("saved", extra={"password": "hunter2", "note": f"a\nb {URL}", "count": 3})
    [record] = caplog.records
    assert vars(record)["password"] == "[redacted]"
    assert vars(record)["note"] == "a b postgresql://app:[redacted]@db.internal:5432/orders"
    assert vars(record)["count"] == 3


def test_arguments_that_do_not_fit_the_message_still_give_a_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    log = logs.logger("flowrunner.test_logs")
    with caplog.at_level(logging.INFO, logger="flowrunner"):
        log.info("%s and %s", f"token={API_KEY}")
    [record] = caplog.records
    assert API_KEY not in record.getMessage() and "token=[redacted]" in record.getMessage()


def test_where_names_the_frames_in_one_line() -> None:
    def inner() -> None:
        raise ValueError(LEAKY)

    try:
        inner()
    except ValueError as exc:
        found = logs.where(exc)
    assert re.fullmatch(
        r"test_logs:\d+ in test_where_names_the_frames_in_one_line > test_logs:\d+ in inner",
        found,
    )
    assert logs.where(ValueError("never raised")) == "no traceback"


def test_every_logger_of_the_package_makes_one_line() -> None:
    """A logger made with ``logging.getLogger`` would hand handlers raw text."""
    package = Path(flowrunner.__file__).parent
    raw = [
        str(path.relative_to(package))
        for path in sorted(package.rglob("*.py"))
        if path.name != "logs.py" and "getLogger(" in path.read_text(encoding="utf-8")
    ]
    assert raw == []


# -- through the real worker --------------------------------------------------------------

PO = app("purchase_orders")

SEND = """
- name: Send
  start: created
  steps:
    - {position: 1, kind: send, title: Send to supplier}
"""


def lines_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    """Every captured flowrunner record as its handler wrote it, after checking it is bare."""
    written = []
    for record in caplog.records:
        if record.name.split(".")[0] != "flowrunner":
            continue
        assert record.exc_info is None and record.exc_text is None and record.stack_info is None
        written.append(caplog.handler.format(record))
    return written


def assert_clean(text: str) -> None:
    for secret in SECRETS:
        assert secret not in text


def test_a_failing_command_leaves_no_secret_in_logs_envelope_or_history(
    any_engine: sa.Engine, caplog: pytest.LogCaptureFixture
) -> None:
    def leaky_send(ctx: commands.CommandContext) -> None:
        if ctx.attempt == 1:
            # SQLAlchemy's text of this error quotes the statement and the record's value.
            ctx.conn.execute(
                sa.text("UPDATE no_such_table SET note = :note"), {"note": ctx.record["approver"]}
            )
        raise RuntimeError(LEAKY)

    kinds = {
        **PO.binding.kinds,
        "send": Kind(
            command="send_purchase_order",
            retry=RetryPolicy(max_attempts=2, base=timedelta(seconds=5)),
        ),
    }
    binding = FlowBinding(**{**PO.binding.model_dump(exclude={"kinds"}), "kinds": kinds})
    driver = mount(
        any_engine,
        "purchase_orders",
        flows=SEND,
        binding=binding,
        commands={"send_purchase_order": leaky_send},
    )
    caplog.set_level(logging.DEBUG, logger="flowrunner")
    order: dict[str, Any] = {
        "id": 1,
        "number": "PO-1",
        "requester_id": "ann",
        "amount": 500,
        "approver": NOTE,
    }
    driver.create(order)
    driver.advance("1 minute")
    [run] = driver.runs(1)
    assert run.status == "failed"

    written = lines_of(caplog)
    failures = [line for line in written if "command send_purchase_order failed" in line]
    assert len(failures) == 2
    assert "UPDATE" not in failures[0] and "no_such_table" in failures[0]
    assert "postgresql://app:[redacted]@db.internal" in failures[1]
    for line in written:
        assert "\n" not in line and "\r" not in line
        assert_clean(line)

    stored = json.dumps(
        {
            "error": run.error,
            "reason": run.reason,
            "history": [dataclasses.asdict(line) for line in driver.history(run.id)],
        },
        default=str,
    )
    assert "[redacted]" in stored and "retry" in stored
    assert_clean(stored)


def test_an_engine_error_is_one_line_and_where_it_happened_is_logged_at_debug(
    any_engine: sa.Engine, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(point: str) -> None:
        if point == "before-save":
            raise RuntimeError(LEAKY)

    driver = mount(any_engine, "tickets")
    driver.worker = worker.Worker(driver.runner, crash_at=broken)
    caplog.set_level(logging.DEBUG, logger="flowrunner")
    driver.create(
        {"id": 1, "title": "T1", "requester_id": "ann", "due_at": T0 + timedelta(hours=8)}
    )
    [run] = driver.runs(1)
    assert run.status == "failed"
    assert run.error is not None and run.error["code"] == "engine_error"

    written = lines_of(caplog)
    [error] = [line for line in written if "could not be advanced" in line]
    assert error.startswith("ERROR ") and error.endswith(
        f"run {run.id} could not be advanced: RuntimeError: could not reach "
        "postgresql://app:[redacted]@db.internal:5432/orders Authorization: [redacted] "
        "api_key=[redacted] Traceback (most recent call last): forged line"
    )
    [where] = [line for line in written if "raised at" in line]
    assert where.startswith("DEBUG ")
    assert re.search(
        r"flowrunner\.engine\.worker:\d+ in _one > .* > test_logs:\d+ in broken$", where
    )
    for line in written:
        assert "\n" not in line
        assert_clean(line)
    assert_clean(json.dumps([run.error, run.reason]))
