"""flowrunner as a reader gets it: the wheel built from this tree, installed with its
extras into a fresh virtual environment of its own — no checkout on its path.

The docs tests run each guide's blocks there (``guides.run_guide``), and the packaging
test checks what the wheel holds. It is built once per test session, whichever test asks
first; the others (in this process or in pytest-xdist's other workers) wait for it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import venv
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# What the guides say to install beside flowrunner: its extras (traces: docs/operating.md),
# the client FastAPI's TestClient needs (docs/web.md, console.md, inbound.md) and the async
# driver of docs/web.md's AsyncEngine.
EXTRAS = "web,console,workflows,postgres,traces"
BESIDE = ("httpx2", "sqlalchemy[asyncio]", "aiosqlite")
# How long a test waits for another's build before it gives up.
WAIT_SECONDS = 600


@dataclass(frozen=True)
class Installed:
    """The wheel, and the Python of the environment it is installed in."""

    wheel: Path
    python: Path


def _build(folder: Path) -> Installed:
    dist = folder / "dist"
    uv = _uv()
    if uv:  # the same wheel and environment, in a few seconds where pip and build take 25
        _run([uv, "build", "--quiet", "--wheel", "--out-dir", str(dist), str(ROOT)])
    else:
        _run([sys.executable, "-m", "build", "--wheel", "--outdir", str(dist), str(ROOT)])
    (wheel,) = dist.glob("flowrunner-*.whl")
    env_dir = folder / "venv"
    # No pip of its own (installing one takes longer than the rest): uv, or this
    # Python's pip, installs into it.
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / ("Scripts" if os.name == "nt" else "bin") / "python"
    what = [f"{wheel}[{EXTRAS}]", *BESIDE]
    if uv:
        _run([uv, "pip", "install", "--quiet", "--python", str(python), *what])
    else:
        _run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", *what])
    return Installed(wheel, python)


def _uv() -> str | None:
    """uv's program, where the dev extra installed it (the ``uv`` package)."""
    try:
        from uv import find_uv_bin
    except ImportError:
        return None
    return str(find_uv_bin())


def _run(command: list[str]) -> None:
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"{' '.join(command)} failed:\n{done.stdout}\n{done.stderr}")


def installed(folder: Path) -> Installed:
    """The wheel installed under ``folder``: built there now, or by whoever came first."""
    folder.mkdir(parents=True, exist_ok=True)
    try:
        (folder / "building").mkdir()  # atomic: one builder
    except FileExistsError:
        return _built_by_another(folder)
    try:
        made = _build(folder)
    except Exception as exc:
        (folder / "failed").write_text(str(exc), encoding="utf-8")
        raise
    (folder / "ready").write_text(f"{made.wheel}\n{made.python}\n", encoding="utf-8")
    return made


def _built_by_another(folder: Path) -> Installed:
    ready, failed = folder / "ready", folder / "failed"
    waited = 0.0
    while not ready.exists():
        if failed.exists():
            raise RuntimeError(failed.read_text(encoding="utf-8"))
        if waited > WAIT_SECONDS:
            raise TimeoutError(f"the wheel in {folder} was not ready after {waited:.0f} s")
        time.sleep(0.5)
        waited += 0.5
    wheel, python = ready.read_text(encoding="utf-8").splitlines()
    return Installed(Path(wheel), Path(python))
