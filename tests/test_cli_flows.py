"""``flowrunner flows import|export|validate`` through click's runner, and one real process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import migrated
import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from fixtures.purchase_orders import app as po
from flowrunner.cli import cli
from flowrunner.flows import files

ROOT = Path(__file__).resolve().parent.parent
APP = "fixtures.purchase_orders.app:runner"


@pytest.fixture
def url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'orders.db'}"
    engine = sa.create_engine(url)
    po.metadata.create_all(engine)
    migrated.upgrade(engine)
    engine.dispose()
    return url


def flows(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["flows", *args])
    return result.exit_code, result.stdout, result.stderr


def stored(url: str) -> tuple[int, int]:
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        counts = (
            int(conn.scalar(sa.select(sa.func.count()).select_from(po.po_flow)) or 0),
            int(conn.scalar(sa.select(sa.func.count()).select_from(po.po_flow_step)) or 0),
        )
    engine.dispose()
    return counts


def test_import_export_and_import_again(url: str, tmp_path: Path) -> None:
    code, out, _ = flows("import", str(po.FLOWS_FILE), "--app", APP, "--database", url)
    assert code == 0
    assert out.strip() == (
        "imported 4 flow(s), 13 step(s): created Big orders, Small orders, Priority raised, Resend"
    )
    code, _, err = flows("import", str(po.FLOWS_FILE), "--app", APP, "--database", url)
    assert code == 1
    assert err.splitlines()[0] == f"{po.FLOWS_FILE}: refused, nothing was imported:"
    assert "  flow 'Big orders': name: there is already a flow named 'Big orders'" in err
    code, out, _ = flows("export", "--app", APP, "--database", url)
    assert code == 0
    assert [d.flow["name"] for d in files.loads_yaml(out)] == [
        "Big orders",
        "Small orders",
        "Priority raised",
        "Resend",
    ]
    target = tmp_path / "flows.csv"
    code, _, err = flows("export", "--app", APP, "--database", url, "-o", str(target))
    assert code == 0 and err.strip() == f"exported 4 flow(s) to {target}"
    code, out, _ = flows("import", str(target), "--app", APP, "--database", url, "--replace")
    assert code == 0
    assert out.strip().endswith("replaced Big orders, Small orders, Priority raised, Resend")
    assert stored(url) == (4, 13)


def test_a_bad_file_is_refused_whole(url: str, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "- name: Fine\n  start: manual\n"
        "- name: Broken\n  start: created\n  steps:\n"
        "    - {position: 1, kind: wait, duration: 2 dayz, title: Pause}\n"
        "    - {position: 2, kind: approve}\n",
        encoding="utf-8",
    )
    code, out, err = flows("import", str(bad), "--app", APP, "--database", url)
    assert code == 1 and out == ""
    assert err.splitlines()[1:] == [
        "  flow 'Broken', step 'Pause' (wait, position 1): duration: "
        "'2 dayz' is not a duration — write e.g. '2 days' or '30 minutes'",
        "  flow 'Broken', step (approve, position 2): kind: kind 'approve' is not in the binding "
        "— use one of set, wait, until, branch, waitFor, notify, subflow, approval, send; "
        "did you mean 'approval'?",
    ]
    assert stored(url) == (0, 0)
    bad.write_text("flows: [", encoding="utf-8")
    code, _, err = flows("import", str(bad), "--app", APP, "--database", url)
    assert code == 2 and err.strip() == (
        "Error: the file is not readable YAML at line 1: a value is missing: a [ or { not closed?"
    )


def test_validate_names_rows_broken_later(url: str) -> None:
    flows("import", str(po.FLOWS_FILE), "--app", APP, "--database", url)
    code, out, _ = flows("validate", "--app", APP, "--database", url)
    assert code == 0 and out.strip() == "4 flow(s), 13 step(s): all sound"
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE po_flow_step SET kind = 'fax' WHERE title = 'Send again'"))
    engine.dispose()
    code, out, err = flows("validate", "--app", APP, "--database", url)
    assert code == 1
    assert err.splitlines() == [
        "flow 'Resend', step 'Send again' (fax, position 1): kind 'fax' is not in the binding "
        "— use one of set, wait, until, branch, waitFor, notify, subflow, approval, send",
        "1 of 4 flow(s) have broken rows",
    ]


def test_a_bad_app_is_one_line(url: str) -> None:
    code, _, err = flows("validate", "--app", "fixtures.nowhere:runner", "--database", url)
    assert code == 2
    assert err.startswith("Error: cannot import 'fixtures.nowhere'") and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.slow
def test_validate_as_a_real_process(url: str) -> None:
    flows("import", str(po.FLOWS_FILE), "--app", APP, "--database", url)
    script = Path(sys.executable).with_name("flowrunner")
    done = subprocess.run(
        [str(script), "flows", "validate", "--app", APP, "--database", url],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "4 flow(s), 13 step(s): all sound"


def test_a_csv_saved_in_the_computers_own_encoding_says_how_to_save_it(
    url: str, tmp_path: Path
) -> None:
    """A spreadsheet's plain "CSV" on Windows is not UTF-8: the line says what to choose."""
    saved = tmp_path / "flows.csv"
    text = files.dumps_csv(files.read_file(po.FLOWS_FILE), po.binding)
    saved.write_bytes(text.replace("Big orders", "Große Bestellungen").encode("cp1252"))
    code, _, err = flows("import", str(saved), "--app", APP, "--database", url)
    assert code == 2
    assert err.strip() == (
        f"Error: {saved} is not UTF-8 text: save it as UTF-8 "
        '(a spreadsheet saves it so as "CSV UTF-8")'
    )
