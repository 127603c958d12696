"""The forked processes the tests start behave as new interpreters would: what they are
given (argv, environment, folder, path, streams) and how they end (a code, a signal)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import forked
import pytest

pytestmark = pytest.mark.skipif(
    bool(os.environ.get("FLOWRUNNER_TEST_EXEC")), reason="FLOWRUNNER_TEST_EXEC=1: no forks"
)

SAYS = """\
import json, os, sys
print(json.dumps({"argv": sys.argv, "cwd": os.getcwd(), "asked": os.environ.get("ASKED"),
                  "path0": sys.path[0], "extra": "/nowhere/else" in sys.path,
                  "main": __name__, "pid": os.getpid()}))
sys.exit(int(sys.stdin.read() or 0))
"""


def test_a_forked_script_gets_its_own_argv_folder_environment_path_and_ends_with_its_code(
    tmp_path: Path,
) -> None:
    script = tmp_path / "says.py"
    script.write_text(SAYS, encoding="utf-8")
    done = forked.run(
        [sys.executable, str(script), "a", "b"],
        input="3",
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "ASKED": "yes", "PYTHONPATH": "/nowhere/else"},
        timeout=60,
    )
    said = json.loads(done.stdout)
    assert done.returncode == 3, done.stderr
    assert said["argv"] == [str(script), "a", "b"]
    assert (said["cwd"], said["path0"]) == (str(tmp_path), str(tmp_path))
    assert (said["asked"], said["extra"], said["main"]) == ("yes", True, "__main__")
    assert said["pid"] != os.getpid()


def test_a_forked_module_and_code_run_as_python_m_and_c_would() -> None:
    helped = forked.run(
        [sys.executable, "-m", "flowrunner", "--help"], capture_output=True, text=True
    )
    assert helped.returncode == 0 and "Usage:" in helped.stdout
    failed = forked.run(
        [sys.executable, "-c", "import sys; print(sys.argv); raise ValueError('no')", "x"],
        capture_output=True,
        text=True,
    )
    assert failed.returncode == 1
    assert failed.stdout.strip() == "['-c', 'x']"
    assert failed.stderr.strip().splitlines()[-1] == "ValueError: no"


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM])
def test_a_forked_process_killed_is_seen_killed(how: signal.Signals) -> None:
    process = forked.popen(
        [sys.executable, "-c", "import time; print('up', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert isinstance(process, forked.Forked)
    assert process.stdout is not None and process.stdout.readline() == "up\n"
    with pytest.raises(subprocess.TimeoutExpired):
        process.wait(timeout=0.05)
    assert process.poll() is None
    process.send_signal(how)
    assert process.wait(timeout=30) == -how
    process.stdout.close()


def test_what_a_fork_cannot_be_is_started_as_a_new_interpreter() -> None:
    process = forked.popen([sys.executable, "-X", "importtime", "-c", "pass"], stderr=-3)
    assert not isinstance(process, forked.Forked)
    assert process.wait(timeout=60) == 0


OTHER = """import importlib.util, json, sys, warnings
print(json.dumps({"prefix": sys.prefix, "filter": warnings.filters[0][0],
                  "sqlalchemy": importlib.util.find_spec("sqlalchemy") is not None,
                  "checkout": importlib.util.find_spec("fixtures") is not None}))
warnings.warn("as an error")
"""


def test_another_interpreter_with_warnings_as_errors_is_forked_from_a_server_of_its_own(
    tmp_path: Path,
) -> None:
    # The interpreter this environment was made from: no SQLAlchemy, no checkout on its
    # path (as the guides' environment has no checkout), warnings errors from the start.
    other = sys._base_executable  # type: ignore[attr-defined]
    assert other != sys.executable
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    process = forked.popen(
        [other, "-W", "error", "-c", OTHER],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert isinstance(process, forked.Forked)
    out, err = process.communicate(timeout=60)
    said = json.loads(out)
    assert said["prefix"] == sys.base_prefix and said["filter"] == "error"
    assert not said["sqlalchemy"] and not said["checkout"]
    assert process.returncode == 1 and "UserWarning: as an error" in err
