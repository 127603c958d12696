"""What a workflow's body may await: its steps, and nothing else.

The worker drives a body by hand (``coroutine.send``), never on an event loop, and
replays it from its recorded steps: whatever else it awaited would never come back, or
come back otherwise on the next replay. ``next_step`` sends the body on to the step it
awaits next. While the body runs, the thread's running loop is one that refuses every
use (what ``asyncio.sleep(5)``, ``asyncio.gather``, ``asyncio.create_task`` and
``asyncio.get_running_loop()`` reach for), so any of them fails the run with one
sentence naming what was awaited (``NotAStep``), even when the body caught what it was
raised.

Pure: no SQL, no clock, no I/O; the loop is the thread's own, put back after each send.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Coroutine, Iterable, Iterator
from types import FrameType, TracebackType
from typing import Any, NoReturn, cast

from flowrunner.workflows import replay

RULE = (
    "a workflow may await only its steps "
    "(w.run, w.call, w.child, w.wait_for, w.sleep, w.until, w.now)"
)


class NotAStep(Exception):
    """The body awaited what is not one of its steps; the sentence names what."""

    def __init__(self, what: str) -> None:
        self.what = what
        """What was awaited: ``asyncio.sleep``, ``loop.create_task``, ``Future``."""
        super().__init__(f"{RULE}; it awaited {what}")


class _LoopRefused(RuntimeError):
    """Raised into the body where it used the event loop. A ``RuntimeError``, as asyncio's
    own "no running event loop" is: asyncio closes what it wrapped when it meets one."""


class _RefusingLoop:
    """The running loop while a body runs: every use is refused, the first remembered."""

    def __init__(self) -> None:
        self.reached: str | None = None

    def __getattr__(self, name: str) -> Any:
        def refuse(*args: object, **kwargs: object) -> NoReturn:
            for given in (*args, *kwargs.values()):
                if inspect.iscoroutine(given):
                    given.close()  # never to run: closed, it is not reported as never awaited
            frame = inspect.currentframe()
            what = _asyncio_name(_outward(frame.f_back if frame is not None else None))
            if self.reached is None:
                self.reached = what or f"loop.{name}"
            raise _LoopRefused(f"{RULE}; it awaited {self.reached}")

        return refuse


def next_step(
    body: Coroutine[Any, Any, Any], value: object, thrown: BaseException | None
) -> replay.Ask:
    """Send ``value`` into the body (or throw ``thrown`` into it) and return the step it
    awaits next.

    Raises what the body raised (``StopIteration`` when it returned), or ``NotAStep``
    when it awaited anything else — or used the event loop or asyncio's waiting, whatever
    it did after.
    """
    loop = _RefusingLoop()
    before = asyncio.events._get_running_loop()
    asyncio.events._set_running_loop(cast(asyncio.AbstractEventLoop, loop))
    try:
        asked = body.throw(thrown) if thrown is not None else body.send(value)
    except Exception as exc:
        what = loop.reached or _asyncio_name(reversed(list(_inward(exc.__traceback__))))
        if what is not None:
            raise NotAStep(what) from None
        raise
    finally:
        asyncio.events._set_running_loop(before)
    if loop.reached is not None:
        raise NotAStep(loop.reached)
    if not isinstance(asked, replay.Ask):
        raise NotAStep(_awaited(body, asked))
    return asked


def _awaited(body: Coroutine[Any, Any, Any], asked: object) -> str:
    """What a body that yielded ``asked`` awaits: the asyncio function it is in
    (``asyncio.sleep`` for ``asyncio.sleep(0)``), else the type of what came out."""
    inner: object = getattr(body, "cr_await", None)
    frames: list[FrameType] = []
    while inspect.iscoroutine(inner) or inspect.isgenerator(inner):
        frame = inner.cr_frame if inspect.iscoroutine(inner) else inner.gi_frame
        if frame is not None:
            frames.append(frame)
        inner = inner.cr_await if inspect.iscoroutine(inner) else inner.gi_yieldfrom
    return _asyncio_name(reversed(frames)) or type(asked).__name__


def _outward(frame: FrameType | None) -> Iterator[FrameType]:
    """The frames from ``frame`` out to its callers', innermost first."""
    while frame is not None:
        yield frame
        frame = frame.f_back


def _inward(tb: TracebackType | None) -> Iterator[FrameType]:
    """A traceback's frames, outermost first."""
    while tb is not None:
        yield tb.tb_frame
        tb = tb.tb_next


def _asyncio_name(frames: Iterable[FrameType]) -> str | None:
    """The asyncio function the body called, from the frames innermost first: the
    outermost of the innermost asyncio frames (``asyncio.gather``, not its helper; not an
    ``asyncio.run`` the worker itself may be under)."""
    named = None
    for frame in frames:
        if not str(frame.f_globals.get("__name__", "")).startswith("asyncio."):
            if named is not None:
                break
            continue
        named = f"asyncio.{frame.f_code.co_qualname}"
    return named
