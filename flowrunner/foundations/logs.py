"""flowrunner's log lines: each record one line, its secrets masked, no traceback.

Every logger of the package comes from ``logger(name)``, which gives it a filter
(``OneLine``) that rewrites each record before any handler sees it — the
application's own handlers and formatters as much as ours:

- the message is formatted with its arguments, then made one masked, bounded line
  (``sanitize.sanitize_text``), and the arguments go;
- an exception given with ``exc_info`` (``log.exception``, ``exc_info=True``) becomes
  ``: ExcType: what it says`` at the line's end (``sanitize.describe_exception``: a
  database error without its statement or bound values), and the traceback goes, as a
  ``stack_info`` dump does;
- values passed with ``extra`` are masked as a record's fields are.

A traceback is never logged: its lines quote source and SQL, and a handler would
write them as many lines. Where an engine error happened is logged at DEBUG as one
line of frames instead (``where``).

A command that logs (``flowrunner worker``, ``flowrunner console``) writes every logger's
lines on standard error while it runs (``to_stderr``): as text, or as one JSON object a
line (``JsonLines``) for a log collector, sanitized the same way.
"""

from __future__ import annotations

import json
import logging
import sys
import traceback
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TextIO

from flowrunner.foundations import sanitize

# Attributes every record has; anything else on a record came with ``extra``.
_STANDARD = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}
_FRAMES = 8

FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"
# How a command may write its lines: ``time LEVEL logger message``, or JSON.
FORMATS = ("text", "json")
# Libraries whose INFO lines say nothing an operator acts on (alembic's "Context impl
# SQLiteImpl" when a runner checks its tables): written from WARNING, or with DEBUG.
QUIET = ("alembic",)


class OneLine(logging.Filter):
    """Makes a record one sanitized line with no traceback; never drops one.

    Attached to a logger, it runs before every handler the record reaches: the logger's
    own and its parents'.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = one_line(record)
        record.args = ()
        record.exc_info = None
        record.exc_text = None
        record.stack_info = None
        for key in [k for k in vars(record) if k not in _STANDARD]:
            value = vars(record)[key]
            vars(record)[key] = (
                sanitize.REDACTED
                if value is not None and sanitize.is_sensitive_field(key)
                else sanitize.sanitize_value(value)
            )
        return True


def logger(name: str) -> logging.Logger:
    """The logger ``name``, whose records are made one sanitized line (``OneLine``).

    >>> log = logger("flowrunner.example")
    >>> logger("flowrunner.example") is log and len(log.filters)
    1
    """
    log = logging.getLogger(name)
    if not any(isinstance(f, OneLine) for f in log.filters):
        log.addFilter(OneLine())
    return log


def where(exc: BaseException) -> str:
    """Where ``exc`` was raised, as one line of ``module:line in function`` frames.

    The innermost frames last, at most eight of them; no source lines, no locals.
    """
    frames = [
        f"{frame.f_globals.get('__name__', '?')}:{line} in {frame.f_code.co_name}"
        for frame, line in traceback.walk_tb(exc.__traceback__)
    ]
    if not frames:
        return "no traceback"
    shown = frames[-_FRAMES:]
    if len(frames) > _FRAMES:
        shown.insert(0, "…")
    return sanitize.sanitize_text(" > ".join(shown))


class JsonLines(logging.Formatter):
    """Each record as one JSON object on one line: ``time`` (ISO 8601, UTC), ``level``,
    ``logger``, ``message``, and the fields it was given with ``extra``.

    The message is the sanitized line ``OneLine`` makes (a record of another library's
    logger is made so here: masked, bounded, its exception at the end, no traceback).

    >>> record = logging.makeLogRecord({"name": "w", "levelname": "INFO", "created": 0,
    ...     "msg": "run %d: token=%s", "args": (7, "s3cr3t"), "run_id": 7})
    >>> print(JsonLines().format(record))  # doctest: +NORMALIZE_WHITESPACE
    {"time": "1970-01-01T00:00:00.000+00:00", "level": "INFO", "logger": "w",
     "message": "run 7: token=[redacted]", "run_id": 7}
    """

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": one_line(record),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and key not in line:
                line[key] = (
                    sanitize.REDACTED
                    if value is not None and sanitize.is_sensitive_field(key)
                    else sanitize.sanitize_value(value)
                )
        return json.dumps(line, ensure_ascii=False, default=str)


class TextLines(logging.Formatter):
    """Each record as one line of text, ``time LEVEL logger message``, its message made as
    ``JsonLines`` makes it (a record of another library's logger too, or a warning:
    masked, bounded, its exception at the end, no traceback).

    >>> record = logging.makeLogRecord({"name": "w", "levelname": "WARNING",
    ...     "msg": "line one\\n  line two: %s", "args": ("password=hunter2",)})
    >>> TextLines().format(record).split(" ", 2)[2]
    'WARNING w line one line two: password=[redacted]'
    """

    def __init__(self) -> None:
        super().__init__(FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        # A copy: the record may go on to the application's own handlers as it came.
        alone = {"msg": one_line(record), "args": (), "exc_info": None, "exc_text": None}
        return super().format(logging.makeLogRecord({**vars(record), **alone, "stack_info": None}))


def one_line(record: logging.LogRecord) -> str:
    """A record's message as one masked, bounded line, its exception at the end."""
    try:
        message = record.getMessage()
    except Exception:  # arguments that do not fit the format, as OneLine keeps them
        message = f"{record.msg} {record.args}"
    message = sanitize.sanitize_text(message)
    exc = record.exc_info[1] if record.exc_info else None
    if exc is not None:
        # Masked apart, so that a secret's value never runs on into the exception's.
        message = f"{message}: {sanitize.describe_exception(exc)}"
    return message


class _Stderr(logging.StreamHandler[TextIO]):
    """Writes to whatever ``sys.stderr`` is at the time: above a live progress bar, which
    takes standard error over while it runs."""

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stderr
        super().emit(record)


@contextmanager
def to_stderr(level: str, format: str = "text") -> Iterator[None]:
    """Every logger's lines at ``level`` (``"INFO"``) and above on standard error, one
    ``time LEVEL logger message`` line each (``format="json"``: one ``JsonLines`` object
    each), until the block ends.

    Set before an app is imported, so that an app calling ``logging.basicConfig`` keeps
    this; undone after, so that a program running a command in-process keeps its own.
    """
    handler = _Stderr()
    handler.setFormatter(JsonLines() if format == "json" else TextLines())
    # A Python warning (a library's, the app's) is a record too, one line like the rest.
    shown = warnings.showwarning
    warnings.showwarning = _warned
    root = logging.getLogger()
    quiet = [logging.getLogger(name) for name in QUIET]
    before = root.level, [log.level for log in quiet]
    root.addHandler(handler)
    root.setLevel(level)
    for log in quiet:
        log.setLevel(level if level == "DEBUG" else "WARNING")
    try:
        yield
    finally:
        warnings.showwarning = shown
        root.removeHandler(handler)
        root.setLevel(before[0])
        for log, was in zip(quiet, before[1], strict=True):
            log.setLevel(was)


def _warned(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    """A Python warning as a log record of ``py.warnings`` (the logger Python's own
    ``logging.captureWarnings`` uses): where and what, without the source line."""
    logging.getLogger("py.warnings").warning(
        "%s:%d: %s: %s", filename, lineno, category.__name__, message
    )
