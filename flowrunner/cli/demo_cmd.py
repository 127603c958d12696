"""``flowrunner demo``: the sample apps end to end on an embedded SQLite file."""

from __future__ import annotations

import tempfile
from pathlib import Path

import click

from flowrunner import cli as cli_mod


@click.command()
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Keep the demo's SQLite files here, to look at afterwards (default: a temporary "
    "folder, removed at the end).",
)
@click.option(
    "--only",
    type=click.Choice(["tickets", "purchase-orders"]),
    default=None,
    help="Run one of the two sample apps.",
)
def demo(directory: Path | None, only: str | None) -> None:
    """Run the support-desk and purchase-order sample apps through the real engine.

    Records are created, a test clock moves through waits, SLA dates, approvals,
    reminders and branches, and each run's history is printed; then three things to try
    next.
    """
    from flowrunner.cli import demo as demo_mod

    if directory is None:
        with tempfile.TemporaryDirectory(prefix="flowrunner-demo-") as scratch:
            demo_mod.run(Path(scratch), only=only, kept=False)
        return
    if any(directory.glob("*.db")):
        raise cli_mod.InputError(f"{directory} already holds a demo; choose an empty folder")
    demo_mod.run(directory, only=only)
