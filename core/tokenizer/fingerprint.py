"""Stable hashes of a tokenizer's vocabulary and of its chat template."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any


def vocab_fingerprint(
    vocab: Mapping[str, int],
    added: Iterable[tuple[int, str, bool]],
    special_map: Mapping[str, Any],
) -> str:
    """sha256 over (token, id) pairs, added tokens (id, text, special) and named specials.

    The inputs are sorted and serialized canonically, so the value is the same across loads
    and processes for the same tokenizer files.
    """
    payload = {
        "vocab": sorted(vocab.items(), key=lambda kv: (kv[1], kv[0])),
        "added": sorted(added),
        "special": {str(k): special_map[k] for k in sorted(special_map, key=str)},
    }
    text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def template_fingerprint(template: object) -> str:
    """sha256 of a chat template: its text, or canonical JSON of named templates.

    Returns "" when there is no template.
    """
    if template is None:
        return ""
    if isinstance(template, str):
        text = template
    else:
        text = json.dumps(template, ensure_ascii=False, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
