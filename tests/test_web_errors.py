"""Every error a web handler can meet answers with its HTTP status and a body programs
can read (``error.status_code``, ``error.to_dict()``); ``flowrunner.web.install`` makes
a FastAPI app answer with them. FastAPI stays an extra: only ``flowrunner.web`` needs it."""

from __future__ import annotations

import logging
import subprocess
import sys

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

import flowrunner
from flowrunner import errors, web

SENTENCE = "a sentence"


@pytest.mark.parametrize(
    ("error", "status", "code"),
    [
        (errors.FlowrunnerError(SENTENCE), 500, "flowrunner_error"),
        (errors.BindingError(SENTENCE), 500, "binding_invalid"),
        (errors.SnapshotBroken(SENTENCE), 409, "snapshot_broken"),
        (errors.SchemaOutdated(SENTENCE), 503, "schema_outdated"),
        (errors.LeaseLost(SENTENCE), 409, "lease_lost"),
        (errors.EventRejected(SENTENCE), 422, "event_rejected"),
        (
            errors.EventRejected(SENTENCE, status_code=404, code="event_unknown"),
            404,
            "event_unknown",
        ),
        (errors.RecordRejected(SENTENCE, value=7, expected="text"), 422, "record_rejected"),
        (errors.OperatorError(SENTENCE), 409, "operator_refused"),
        (errors.OperatorError(SENTENCE, status_code=404, code="run_unknown"), 404, "run_unknown"),
        (errors.CommandRefused(SENTENCE), 409, "command_refused"),
    ],
    ids=lambda v: v if isinstance(v, str | int) else type(v).__name__,
)
def test_each_error_carries_its_status_and_a_body(
    error: errors.FlowrunnerError, status: int, code: str
) -> None:
    assert (error.status_code, error.code) == (status, code)
    assert error.to_dict() == {"detail": SENTENCE, "code": code}
    assert str(error) == SENTENCE


def test_a_query_error_answers_422_with_where_it_went_wrong() -> None:
    with pytest.raises(errors.QueryError) as refused:
        flowrunner.parse("status = open and")
    assert refused.value.status_code == 422
    body = refused.value.to_dict()
    assert body["code"] == "query_invalid" and body["detail"] == str(refused.value)
    assert (body["line"], body["column"]) == (1, 18)
    assert body["found"] == "end of text" and body["expected"]
    with pytest.raises(errors.DurationError) as duration:
        flowrunner.parse_duration("2 dayz")
    assert (duration.value.status_code, duration.value.code) == (422, "duration_invalid")


def test_row_invalid_keeps_fastapis_422_shape() -> None:
    error = errors.RowInvalid(
        [
            errors.FieldError("duration", "'2 dayz' is not a duration", "duration_invalid"),
            errors.FieldError("kind", "there is no kind 'x'", "kind_unknown"),
        ]
    )
    assert (error.status_code, error.code) == (422, "row_invalid")
    assert error.to_dict() == {
        "detail": [
            {
                "loc": ["body", "duration"],
                "msg": "'2 dayz' is not a duration",
                "type": "duration_invalid",
            },
            {"loc": ["body", "kind"], "msg": "there is no kind 'x'", "type": "kind_unknown"},
        ]
    }


def raising(error: Exception) -> FastAPI:
    app = FastAPI()

    @app.get("/boom")
    def boom() -> None:
        raise error

    return app


def test_installed_handlers_answer_each_error_with_its_status_and_body() -> None:
    for error in (
        errors.OperatorError("run 7 has already ended (done)"),
        errors.EventRejected("there is no event 'x'", status_code=404, code="event_unknown"),
        errors.RowInvalid([errors.FieldError("name", "name a flow", "column_required")]),
        errors.RecordRejected("purchase_order '007' is not a purchase_order key: send 7"),
    ):
        answered = TestClient(web.install(raising(error))).get("/boom")
        assert (answered.status_code, answered.json()) == (error.status_code, error.to_dict())
    # The same handlers given to FastAPI() at its creation.
    app = FastAPI(exception_handlers=web.EXCEPTION_HANDLERS)

    @app.get("/boom")
    def boom() -> None:
        raise errors.QueryError("expected a value", line=1, column=9)

    answered = TestClient(app).get("/boom")
    assert answered.status_code == 422 and answered.json()["column"] == 9


def test_a_servers_own_error_is_logged_and_its_sentence_kept_from_the_client(
    caplog: pytest.LogCaptureFixture,
) -> None:
    secret = "table 'po_flow' lacks column 'approver' in schema tenant_a"
    with caplog.at_level(logging.ERROR, logger="flowrunner.web"):
        answered = TestClient(web.install(raising(errors.BindingError(secret)))).get("/boom")
        outdated = TestClient(web.install(raising(errors.SchemaOutdated("migrate up")))).get(
            "/boom"
        )
    assert answered.status_code == 500
    assert answered.json() == {"detail": web.handlers.SERVER_SIDE, "code": "binding_invalid"}
    assert secret not in answered.text
    assert (outdated.status_code, outdated.json()["code"]) == (503, "schema_outdated")
    logged = [r.getMessage() for r in caplog.records]
    assert logged == [
        f"answered 500 (binding_invalid): {secret}",
        "answered 503 (schema_outdated): migrate up",
    ]


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )


def test_without_fastapi_the_web_module_says_how_to_install_it() -> None:
    found = run_python(
        "import sys; sys.modules['fastapi'] = None; from flowrunner.web import install"
    )
    assert found.returncode == 1
    last = found.stderr.strip().splitlines()[-1]
    assert last == (
        "flowrunner.errors.ExtraMissing: flowrunner.web needs fastapi, which is not installed: "
        "pip install 'flowrunner[web]'"
    )


def test_the_core_runs_without_fastapi() -> None:
    found = run_python(
        "import sys\n"
        "for name in ('fastapi', 'starlette', 'httpx', 'httpx2'):\n"
        "    sys.modules[name] = None\n"
        "import flowrunner, flowrunner.runner, flowrunner.engine.worker, flowrunner.testing\n"
        "import flowrunner.engine.async_engines, flowrunner.cli, flowrunner.cli.demo\n"
        "print('ok')\n"
    )
    assert (found.returncode, found.stdout.strip()) == (0, "ok"), found.stderr
