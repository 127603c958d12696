"""The README's example flow is a real one, and its test command is the one CI runs."""

from __future__ import annotations

import re
from pathlib import Path

from running import app

from flowrunner import query
from flowrunner.flows import files

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"


def test_the_readme_flow_is_valid_for_the_purchase_order_app() -> None:
    [text] = re.findall(r"```yaml\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)
    docs = files.loads_yaml(text)
    module = app("purchase_orders")
    columns = query.column_types(module.purchase_order)
    assert files.problems(module.binding, docs, columns) == []
    assert [d.flow["name"] for d in docs] == ["Big orders"]


def test_the_readme_test_command_is_what_ci_runs() -> None:
    commands = re.findall(r"```sh\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)
    full_suite = commands[1].strip().split(" && ")[-1]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    run_in_ci = ci[ci.index("# The README's test command:") + 1]
    assert run_in_ci.split(" || ")[0] == full_suite == "python -m pytest"
    assert '`python -m pytest -m "not slow"`' in README.read_text(encoding="utf-8")
