"""The README's example flow is a real one: it reads and validates against the sample app."""

from __future__ import annotations

import re
from pathlib import Path

from running import app

from flowrunner import flowfiles, query

README = Path(__file__).resolve().parent.parent / "README.md"


def test_the_readme_flow_is_valid_for_the_purchase_order_app() -> None:
    [text] = re.findall(r"```yaml\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)
    docs = flowfiles.loads_yaml(text)
    module = app("purchase_orders")
    columns = query.column_types(module.purchase_order)
    assert flowfiles.problems(module.binding, docs, columns) == []
    assert [d.flow["name"] for d in docs] == ["Big orders"]
