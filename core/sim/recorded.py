"""Recordings of real SGLang the sim reproduces, read once from the files in ``assets/``.

``sglang-0.5.23-server-args.json`` is SGLang 0.5.23's resolved ``server_args`` as
``/server_info`` returned it on a CPU run of the real server: every key in its
order, so ``/server_info`` and the ``server_args=`` start-up line have SGLang's
exact shape (the sim overrides the values it knows, in ``server_info.py``).
``sglang-0.5.23-info-fields.json`` holds two nested info fields of the same
recording. The files are data only; docs/sim.md says where each came from.
"""

from __future__ import annotations

import json
from importlib.resources import files
from typing import Any, Final


def load_asset(name: str) -> Any:
    """The parsed JSON file ``assets/NAME`` (shipped as package data)."""
    return json.loads(files(__package__).joinpath("assets", name).read_text(encoding="utf-8"))


RECORDED_SERVER_ARGS: Final[dict[str, Any]] = load_asset("sglang-0.5.23-server-args.json")

_INFO_FIELDS: Final[dict[str, Any]] = load_asset("sglang-0.5.23-info-fields.json")
RECORDED_HICACHE_LAYOUT: Final[dict[str, Any]] = _INFO_FIELDS["hicache_object_layout"]
RECORDED_MODEL_EMBEDDING: Final[dict[str, Any]] = _INFO_FIELDS["embedding"]
