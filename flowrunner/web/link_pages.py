"""Answer links' pages: opening a link asks, one button answers.

``answer_pages(runner)`` is a Starlette application to mount where the runner's answer
links point (``base_url``)::

    app.mount("/answer", web.answer_pages(runner))     # FastAPI or Starlette

``GET /TOKEN`` shows one question ("Approve PO-7 as ann?") and one button, and changes
nothing, so a mail scanner that opens every link answers nothing; the button POSTs back
to the same address, which answers once (``engine.answer_links``). A link that is not
valid, already used, expired, or for a step that no longer waits gets a page saying so,
with its status (400, 409, 410, 409). The signed token is the only credential: no
sign-in, no cookie, and the form carries nothing but the address. Every text is escaped;
the pages fit a phone. The console serves them too, under ``…/answer/TOKEN``.
"""

from __future__ import annotations

from collections.abc import Callable
from html import escape
from typing import Protocol

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.routing import Route

from flowrunner.engine import answer_links
from flowrunner.engine.answer_links import AnswerLinks, Outcome
from flowrunner.foundations import logs

log = logs.logger("flowrunner.web.link_pages")


class Answering(Protocol):
    """A runner whose answer links these pages serve (``FlowRunner`` is one)."""

    @property
    def answers(self) -> AnswerLinks: ...


# Nothing from elsewhere, no script; the address (which holds the token) never leaves
# in a Referer; no search engine keeps the page.
_HEADERS = {
    "content-security-policy": (
        "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    ),
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
    "x-content-type-options": "nosniff",
    "x-robots-tag": "noindex, nofollow",
}

_STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;background:#f5f6f8;
color:#1d2430}
main{max-width:32rem;margin:0 auto;padding:2rem 1.25rem}
.card{background:#fff;border:1px solid #d9dde3;border-radius:.5rem;padding:1.5rem}
h1{font-size:1.35rem;line-height:1.3;margin:0 0 .75rem;overflow-wrap:anywhere}
p{line-height:1.5;margin:.5rem 0;overflow-wrap:anywhere}
.about{color:#56606e;font-size:.95rem}
button{display:block;width:100%;margin-top:1.25rem;padding:.85rem 1rem;font-size:1.05rem;
border:0;border-radius:.4rem;background:#1f5fbf;color:#fff;cursor:pointer}
button:focus{outline:3px solid #9cc0f5;outline-offset:2px}
.refused h1{color:#8a1c1c}
.done h1{color:#1d6b35}
"""


def answer_pages(runner: Answering) -> Starlette:
    """The pages of ``runner``'s answer links, as an ASGI application to mount."""
    links = runner.answers

    def show(request: Request) -> HTMLResponse:
        return _guarded(links.ask, request)

    def confirm(request: Request) -> HTMLResponse:
        return _guarded(links.answer, request)

    return Starlette(
        routes=[
            Route("/{token}", show, methods=["GET"]),
            Route("/{token}", confirm, methods=["POST"]),
        ]
    )


def _guarded(answer: Callable[[str], Outcome], request: Request) -> HTMLResponse:
    """The page of what ``answer`` made of the link's token; a page saying to try again
    later (503, nothing answered) when the engine could not answer at all, and one
    masked log line saying why — the token, a credential, never in it."""
    try:
        outcome = answer(request.path_params["token"])
    except Exception as exc:  # the database away, a fault of ours: no answer was kept
        log.error("an answer link's %s page answered 503", request.method, exc_info=exc)
        log.debug("where it failed: %s", logs.where(exc))
        outcome = answer_links.UNAVAILABLE_NOW
    return _page(outcome)


def _page(outcome: Outcome) -> HTMLResponse:
    question = outcome.question
    about = ""
    if question is not None:
        about = (
            f'<p class="about">{escape(question.resource)} · {escape(question.record)} · '
            f"{escape(question.step)}</p>"
        )
    if outcome.code == answer_links.ASK:
        assert question is not None
        body = (
            f'<div class="card ask"><h1>{escape(outcome.sentence)}</h1>{about}'
            f'<p class="about">This link works until {escape(question.expires)}. '
            "Nothing is answered until you press the button.</p>"
            f'<form method="post"><button type="submit">{escape(question.verb)}</button>'
            "</form></div>"
        )
        title = outcome.sentence
    elif outcome.code == answer_links.ANSWERED:
        body = f'<div class="card done"><h1>{escape(outcome.sentence)}</h1>{about}</div>'
        title = "Answered"
    else:
        body = (
            f'<div class="card refused"><h1>{escape(outcome.sentence)}</h1>{about}'
            '<p class="about">Nothing was answered.</p></div>'
        )
        title = "Not answered"
    html = (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="robots" content="noindex, nofollow">'
        f"<title>{escape(title)}</title><style>{_STYLE}</style></head>"
        f"<body><main>{body}</main></body></html>"
    )
    return HTMLResponse(html, status_code=outcome.status, headers=_HEADERS)


__all__ = ["Answering", "answer_pages"]
