"""The Operations room's Jobs page: the jobs the app mounts, when each runs next and
last, who paused it; an operator pauses and resumes a job at times there, journaled with
the reader's name as ``flowrunner jobs pause|resume`` does.

A job at times runs for the whole app (a ``realm="tenant"`` job for every tenant): on a
tenant binding the page lists the jobs and leaves steering them to the command line.
"""

from __future__ import annotations

from starlette.responses import Response

from flowrunner import errors
from flowrunner.jobs.program import Jobs
from flowrunner.web.console import access
from flowrunner.web.console.page import Page

JOB_ACTIONS = access.JOB_ACTIONS
# How long a click waits while a worker runs the job's slot before it is refused.
WAIT_SECONDS = 5.0


def _jobs(page: Page) -> Jobs | None:
    mounted = page.runner.mounted.jobs
    return mounted if isinstance(mounted, Jobs) else None


def jobs_page(page: Page) -> Response:
    closed = page.outside("jobs")
    if closed is not None:
        return closed
    mounted = _jobs(page)
    listed = []
    if mounted is not None:
        mounted.prepare()  # each job at times has its run from now on
        listed = mounted.list()
    steers = page.runner.binding.tenant is None
    may = {
        action: steers and page.console.access.may(page.reader, action, None)
        for action in JOB_ACTIONS
    }
    return page.render("jobs.html", jobs=listed, may=may, steers=steers)


def act_on_job(page: Page) -> Response:
    """Pause or resume one job at times, as the reader; back to the Jobs page, saying so."""
    closed = page.outside("jobs")
    if closed is not None:
        return closed
    action = page.params["action"]
    name = page.form.get("job", "")
    if action not in JOB_ACTIONS:
        raise errors.OperatorError(
            f"there is no action {action!r} on a job: {', '.join(JOB_ACTIONS)}",
            status_code=404,
        )
    if page.runner.binding.tenant is not None:
        return page.refusal(
            "a job runs for every tenant: pause and resume it with flowrunner jobs",
            status=403,
        )
    if not page.console.access.may(page.reader, action, None):
        return page.refusal(f"{page.reader.name} may not {action} a job", status=403)
    mounted = _jobs(page)
    if mounted is None:
        raise errors.OperatorError(
            f"there is no job {name!r}: the app mounts no jobs", status_code=404
        )
    if action == "pause":
        mounted.pause(name, operator=page.reader.name, wait=WAIT_SECONDS)
        said = f"Paused job {name}: it runs no slot until resumed."
    else:
        mounted.resume(name, operator=page.reader.name, wait=WAIT_SECONDS)
        said = f"Resumed job {name}."
    return page.redirect("/ops/jobs", said=said)


ROUTES = [
    ("GET", "/ops/jobs", jobs_page),
    ("POST", "/ops/jobs/{action}", act_on_job),
]
