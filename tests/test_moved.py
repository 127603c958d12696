"""Modules of earlier releases import by their old names: the same module object under
its new name, with a warning that names where it went."""

from __future__ import annotations

import importlib
import sys

import pytest

import flowrunner  # noqa: F401 - installs the old names
from flowrunner import moved
from flowrunner.jobs.program import Jobs


@pytest.mark.parametrize("old", sorted(moved.MOVED))
def test_an_old_module_name_is_its_new_module_with_a_warning(old: str) -> None:
    name = f"flowrunner.{old}"
    new = moved.new_name(name)
    assert new is not None
    sys.modules.pop(name, None)
    with pytest.warns(DeprecationWarning, match=f"{name} is now {new}"):
        module = importlib.import_module(name)
    assert module is importlib.import_module(new)


def test_a_name_of_a_module_that_became_a_package_is_found_in_its_new_home() -> None:
    with pytest.warns(DeprecationWarning, match="flowrunner.jobs.Jobs is now"):
        from flowrunner.jobs import Jobs as old

    assert old is Jobs
    with pytest.raises(ImportError):
        from flowrunner.jobs import nothing_of_the_kind  # noqa: F401


def test_a_module_that_did_not_move_is_no_old_name() -> None:
    assert moved.new_name("flowrunner.runner") is None
    assert moved.new_name("flowrunner.store.runs") is None
    assert moved.new_name("sqlalchemy.orm") is None
