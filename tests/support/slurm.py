"""What a real Slurm printed (tests/fixtures/slurm, recorded by
scripts/slurm/record-fixtures.sh), given back as the process that printed it."""

from __future__ import annotations

import subprocess
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "slurm"


def recorded(name: str) -> subprocess.CompletedProcess[str]:
    """A fixture as the process that printed it: stdout, or stderr and the exit status."""
    lines = (FIXTURES / name).read_text(encoding="utf-8").splitlines()[1:]  # "$ command"
    if lines and lines[-1].startswith("[exit status "):
        code = int(lines[-1].removeprefix("[exit status ").rstrip("]"))
        return subprocess.CompletedProcess([], code, "", "\n".join(lines[:-1]) + "\n")
    return subprocess.CompletedProcess([], 0, "\n".join(lines) + "\n", "")
