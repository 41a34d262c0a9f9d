"""Normalizing what ``apply_chat_template`` returns across transformers versions."""

from __future__ import annotations

import operator
from collections.abc import Mapping
from typing import Any

from eagle_tui.core.errors import TokenizerError


def as_id_list(result: Any, where: str) -> list[int]:
    """Token ids from ``apply_chat_template(tokenize=True)``.

    Accepts a list of ints (transformers 4), a ``BatchEncoding`` / mapping with ``input_ids``
    (transformers 5), a batch of one, or anything with ``tolist()``. ``where`` names the
    tokenizer in the error raised for any other shape.
    """
    ids = result
    if isinstance(ids, Mapping):
        if "input_ids" not in ids:
            raise TokenizerError(
                f"chat template of {where} returned a mapping without input_ids "
                f"(keys: {sorted(map(str, ids))}); the tokenizer's apply_chat_template is unusual"
            )
        ids = ids["input_ids"]
    if hasattr(ids, "tolist"):
        ids = ids.tolist()
    if isinstance(ids, list | tuple) and len(ids) == 1 and isinstance(ids[0], list | tuple):
        ids = ids[0]
    if not isinstance(ids, list | tuple):
        raise TokenizerError(
            f"chat template of {where} returned {type(ids).__name__}, not token ids; "
            "the tokenizer's apply_chat_template is unusual"
        )
    try:
        return [operator.index(i) for i in ids]
    except TypeError as e:
        raise TokenizerError(
            f"chat template of {where} returned non-integer ids ({e}); "
            "the tokenizer's apply_chat_template is unusual"
        ) from e
