"""One request to the console, as its pages see it: the reader, the form, and the answer.

A page is a plain function ``(Page) -> Response``, run in a worker thread (the runner's
calls block); ``endpoint`` wraps it: it finds the reader, reads the form, checks its
CSRF token on every POST, and answers flowrunner's errors with a page saying why.
"""

from __future__ import annotations

import contextlib
import dataclasses
import urllib.parse
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import jinja2
import sqlalchemy as sa
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from flowrunner import errors
from flowrunner.engine import worker
from flowrunner.foundations import logs
from flowrunner.store import dialects
from flowrunner.store import operations as ops
from flowrunner.web.console import access, csrf, shown

if TYPE_CHECKING:
    from flowrunner.web.console.runner_view import ConsoleRunner

# The console's templates and static files, beside its modules.
HERE = Path(__file__).parent

log = logs.logger("flowrunner.web.console")


class _Compiled(jinja2.BytecodeCache):
    """The templates compiled once a process, for every console it serves: each console
    has its own environment (its filters tell time on its runner's clock), and an
    environment compiles each template again, where the compiled code can be shared.
    A template whose file changed is compiled again (its checksum differs)."""

    def __init__(self) -> None:
        self.kept: dict[str, bytes] = {}

    def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        code = self.kept.get(bucket.key)
        if code is not None:
            bucket.bytecode_from_string(code)

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        self.kept[bucket.key] = bucket.bytecode_to_string()


_COMPILED = _Compiled()


class Console:
    """What every page of one console shares: the runner, access, CSRF and templates."""

    def __init__(
        self,
        runner: ConsoleRunner,
        access: access.Access,
        *,
        secret: bytes,
        title: str,
    ) -> None:
        self.runner = runner
        self.access = access
        self.csrf = csrf.Csrf(secret)
        self.title = title
        self.templates = jinja2.Environment(
            loader=jinja2.FileSystemLoader(HERE / "templates"),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
            bytecode_cache=_COMPILED,
        )
        shown.install(self.templates, runner)


SAID_COOKIE = "flowrunner_said"
_R = TypeVar("_R", bound=Response)
SERVER_SIDE = "the workflow engine cannot answer this request now; the server's log says why"


@dataclasses.dataclass(frozen=True)
class Form:
    """A POSTed form: each field's values as text (an uploaded file's as its text)."""

    fields: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)

    def get(self, name: str, default: str = "") -> str:
        values = self.fields.get(name)
        return values[-1] if values else default

    def getlist(self, name: str) -> list[str]:
        return list(self.fields.get(name, ()))

    def __contains__(self, name: object) -> bool:
        return name in self.fields


class Page:
    """One request: its reader, form and parameters, and the ways to answer it."""

    def __init__(
        self,
        console: Console,
        request: Request,
        reader: access.Principal,
        form: Form,
    ) -> None:
        self.console = console
        self.request = request
        self.reader = reader
        self.form = form
        self.params: Mapping[str, str] = {k: str(v) for k, v in request.path_params.items()}
        self.query = request.query_params
        self._cookies: list[tuple[str, str, int | None]] = []

    @property
    def runner(self) -> ConsoleRunner:
        return self.console.runner

    @property
    def tenant(self) -> str | None:
        """The reader's tenant on a tenant binding (they must have one); else None."""
        if self.runner.binding.tenant is None:
            return None
        if self.reader.tenant is None:
            raise access.Refused(
                f"{self.runner.binding.resource} records belong to tenants, and the "
                "application names no tenant of yours",
                status_code=403,
            )
        return self.reader.tenant

    def url(self, path: str, **query: Any) -> str:
        """``path`` under the console's mount (``/flows`` + ``/flows/3``), with a query."""
        root = self.request.scope.get("root_path", "").rstrip("/")
        given = {k: v for k, v in query.items() if v not in (None, "")}
        tail = f"?{urllib.parse.urlencode(given, doseq=True)}" if given else ""
        return f"{root}{path}{tail}"

    # -- the database ------------------------------------------------------------------

    @contextlib.contextmanager
    def reading(self) -> Iterator[sa.Connection]:
        with self.runner.engine.connect() as conn:
            yield conn

    @contextlib.contextmanager
    def writing(self) -> Iterator[sa.Connection]:
        """A transaction that commits when the block ends, and rolls back if it raises."""
        with dialects.begin(self.runner.engine) as conn:
            yield conn

    def journal(self, conn: sa.Connection, action: str, **detail: Any) -> None:
        """Journal what the reader did (an edit), in the edit's transaction."""
        ops.journal(
            conn,
            operator=self.reader.name,
            action=action,
            at=self.runner.clock(),
            tenant=self.tenant,
            resource=self.runner.binding.resource,
            detail=detail,
        )

    # -- answers -----------------------------------------------------------------------

    def render(self, template: str, *, status: int = 200, **context: Any) -> HTMLResponse:
        """The page ``template`` with ``context``; every text in it is escaped."""
        said = self.request.cookies.get(SAID_COOKIE)
        if said is not None:
            self._cookies.append((SAID_COOKIE, "", 0))
        body = self.console.templates.get_template(template).render(
            page=self,
            reader=self.reader,
            csrf_token=self.csrf_token,
            said=urllib.parse.unquote(said) if said else None,
            title=self.console.title,
            root=self.url(""),
            focus=shown.Focus(),
            **context,
        )
        return self._finish(HTMLResponse(body, status_code=status))

    def redirect(self, path: str, *, said: str | None = None, **query: Any) -> Response:
        """See other (303) at ``path``, saying ``said`` there once."""
        response = RedirectResponse(self.url(path, **query), status_code=303)
        if said:
            self._cookies.append((SAID_COOKIE, urllib.parse.quote(said), None))
        return self._finish(response)

    @property
    def areas(self) -> frozenset[str]:
        """The Operations room's areas the reader sees (``Access.areas``)."""
        return self.console.access.areas(self.reader)

    def outside(self, area: str) -> HTMLResponse | None:
        """A refusal (403) when the reader's roles do not open ``area``; else None."""
        if area in self.areas:
            return None
        return self.refusal(
            f"{self.reader.name} may not see {area} here: none of their roles opens the "
            f"Operations room's {area} area",
            status=403,
        )

    def refusal(self, message: str, *, status: int) -> HTMLResponse:
        return self.render("refused.html", status=status, message=message)

    def error(self, exc: errors.FlowrunnerError) -> HTMLResponse:
        """flowrunner's error as a page: its status and its sentence (5xx: a generic one)."""
        if exc.status_code >= 500:
            log.error("answered %s (%s): %s", exc.status_code, exc.code, exc)
            return self.refusal(SERVER_SIDE, status=exc.status_code)
        return self.refusal(str(exc), status=exc.status_code)

    def failure(self, exc: Exception) -> HTMLResponse:
        """A failure nothing the reader did explains, as the console's page: 503 while the
        database fails, else 500, with the generic sentence. The log gets one masked line
        naming the request and the error (a database error without its statement or
        values) and, at DEBUG, where it happened: never a traceback."""
        request = self.request
        status = 503 if worker.database_failed(exc) else 500
        log.error("answered %s to %s %s", status, request.method, request.url.path, exc_info=exc)
        log.debug("where it failed: %s", logs.where(exc))
        return self.refusal(SERVER_SIDE, status=status)

    @property
    def csrf_token(self) -> str:
        """The session's CSRF token for the page's forms (a new session gets one)."""
        token = self.console.csrf.session_token(self.request)
        if token is None:
            token, cookie = self.console.csrf.new_token()
            self._cookies.append((csrf.COOKIE, cookie, None))
            # The same page may ask again: answer with the same token.
            self.request.cookies[csrf.COOKIE] = cookie
        return token

    def _finish(self, response: _R) -> _R:
        path = self.request.scope.get("root_path", "") or "/"
        secure = self.request.url.scheme == "https"
        for name, value, max_age in self._cookies:
            response.set_cookie(
                name,
                value,
                max_age=max_age,
                path=path,
                httponly=True,
                samesite="strict",
                secure=secure,
            )
        return response

    # -- shown values ------------------------------------------------------------------

    def when(self, moment: datetime | None) -> str:
        """A moment on the reader's wall clock with its zone, as every page writes it."""
        return "" if moment is None else shown.moment_in(moment, self.runner.config.timezone)


Handler = Callable[[Page], Response]


def endpoint(console: Console, handler: Handler) -> Callable[[Request], Any]:
    """The Starlette endpoint of a page function."""

    async def serve(request: Request) -> Response:
        try:
            reader = await console.access.reader(request)
        except access.Refused as refused:
            return _bare_refusal(console, request, str(refused), refused.status_code)
        form = Form()
        if request.method == "POST":
            form = await _read_form(request)
            try:
                console.csrf.check(request, form.get(csrf.FIELD))
            except csrf.Forged as forged:
                return _bare_refusal(console, request, str(forged), 403, reader)
        page = Page(console, request, reader, form)
        try:
            return await run_in_threadpool(handler, page)
        except access.Refused as refused:
            return page.refusal(str(refused), status=refused.status_code)
        except errors.FlowrunnerError as exc:
            return page.error(exc)
        except Exception as exc:  # the database away, a bug: no sentence of ours says why
            return page.failure(exc)

    return serve


async def _read_form(request: Request) -> Form:
    fields: dict[str, list[str]] = {}
    async with request.form() as data:
        for key, value in data.multi_items():
            if isinstance(value, UploadFile):
                text = (await value.read()).decode("utf-8", errors="replace")
                if not value.filename and not text:
                    continue  # an empty file input
                fields.setdefault(key, []).append(text)
            else:
                fields.setdefault(key, []).append(value)
    return Form({k: tuple(v) for k, v in fields.items()})


def _bare_refusal(
    console: Console,
    request: Request,
    message: str,
    status: int,
    reader: access.Principal | None = None,
) -> HTMLResponse:
    """A refusal before there is a page (no reader, or a forged form); on a token
    console, a request without the token gets the sign-in page."""
    if status == 401 and console.access.token:
        wanted = request.url.path if request.method == "GET" else ""
        query = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
        if wanted and query:
            wanted += "?" + urllib.parse.urlencode(query)
        response = bare(
            console,
            request,
            "signin.html",
            status=401,
            message=message,
            next=next_path(request, wanted),
            in_address="token" in request.query_params,
        )
        response.headers["www-authenticate"] = 'Bearer realm="flowrunner console"'
        return response
    return bare(console, request, "refused.html", status=status, message=message, reader=reader)


def bare(
    console: Console,
    request: Request,
    template: str,
    *,
    status: int,
    reader: access.Principal | None = None,
    **context: Any,
) -> HTMLResponse:
    """``template`` rendered without a page: for a request the console has no reader of."""
    body = console.templates.get_template(template).render(
        page=None,
        reader=reader,
        csrf_token="",
        said=None,
        title=console.title,
        root=request.scope.get("root_path", "").rstrip("/"),
        focus=shown.Focus(),
        **context,
    )
    return HTMLResponse(body, status_code=status)


def next_path(request: Request, wanted: str) -> str:
    """Where to go once signed in: ``wanted`` if it is a page of this console (a path
    under its root, never another site), else the console's first page."""
    root = request.scope.get("root_path", "").rstrip("/")
    plain = wanted.isprintable() and "\\" not in wanted and not wanted.startswith("//")
    if plain and wanted.startswith(f"{root}/") and "//" not in wanted:
        return wanted
    return f"{root}/"
