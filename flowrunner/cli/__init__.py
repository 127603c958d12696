"""The ``flowrunner`` command line: one group, each subcommand in its own module."""

from __future__ import annotations

import importlib
from typing import Any

import click

# name -> "module:attribute"; loaded only when the subcommand is used, so
# `flowrunner --help` stays fast and one broken subcommand cannot break the rest.
SUBCOMMANDS = {
    "query": "flowrunner.cli.query_cmd:query",
    "flows": "flowrunner.cli.flows_cmd:flows",
    "migrate": "flowrunner.cli.migrate_cmd:migrate",
    "worker": "flowrunner.cli.engine_cmd:worker",
    "demo": "flowrunner.cli.demo_cmd:demo",
    "prune": "flowrunner.cli.prune_cmd:prune",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(name for name in SUBCOMMANDS if self._load(name) is not None)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return self._load(cmd_name)

    @staticmethod
    def _load(name: str) -> click.Command | None:
        target = SUBCOMMANDS.get(name)
        if target is None:
            return None
        module_name, attr = target.split(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name == module_name:
                return None
            raise
        command: Any = getattr(module, attr)
        assert isinstance(command, click.Command)
        return command


@click.group(cls=LazyGroup)
@click.version_option(package_name="flowrunner")
def cli() -> None:
    """flowrunner: workflows that business users edit as rows, run durably over records."""


def main() -> None:
    cli()
