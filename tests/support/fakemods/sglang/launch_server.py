"""``python -m sglang.launch_server …`` for tests: the port holder under SGLang's name."""

from __future__ import annotations

import runpy
from pathlib import Path

runpy.run_path(str(Path(__file__).resolve().parents[2] / "portholder.py"), run_name="__main__")
