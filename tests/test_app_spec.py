"""``--app MODULE:ATTR``: what each kind of bad spec is told, in one sentence."""

from __future__ import annotations

from pathlib import Path

import pytest

from flowrunner import errors
from flowrunner.cli import app_loader


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "spec_app.py").write_text("runner = 42\n\nclass Holder:\n    runner = 42\n")
    (tmp_path / "spec_broken.py").write_text("import os\n\nos.no_such_thing\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("spec_app", "--app must look like MODULE:ATTR, e.g. myapp.flows:runner; got 'spec_app'"),
        ("spec_app:", "--app must look like MODULE:ATTR, e.g. myapp.flows:runner; got 'spec_app:'"),
        ("spec-app:runner", "--app must look like MODULE:ATTR"),
        ("spec_nowhere:runner", "cannot import 'spec_nowhere' named by --app: No module named"),
        ("spec_app:missing", "module 'spec_app' has no attribute 'missing'"),
        ("spec_app:Holder.missing", "module 'spec_app' has no attribute 'Holder.missing'"),
        ("spec_app:runner", "spec_app:runner is neither a FlowRunner nor a function returning one"),
        ("spec_app:Holder.runner", "is neither a FlowRunner nor a function returning one"),
    ],
)
def test_a_bad_spec_is_one_sentence(here: Path, spec: str, message: str) -> None:
    with pytest.raises(errors.BindingError) as caught:
        app_loader.load_app(spec)
    assert message in str(caught.value)


def test_an_error_inside_the_module_is_not_hidden(here: Path) -> None:
    with pytest.raises(AttributeError, match="no_such_thing"):
        app_loader.load_app("spec_broken:runner")
