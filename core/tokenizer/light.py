"""Decoding stored rows without ``transformers``: ``tokenizer.json`` read by ``tokenizers``.

Reading rows back (``eagle-tui inspect``) needs ids to text, ids to token names, the
boundary ids and the fingerprint to compare with the batch's; importing ``transformers``
for that cost more CPU than everything else ``inspect`` does. A tokenizer directory
qualifies when the stock fast tokenizer would decode it exactly as its Rust backend does: a
``tokenizer.json``, no code of its own (``auto_map``), the generic tokenizer class and no
``clean_up_tokenization_spaces``. Anything else loads through ``load_tokenizer``.

The fingerprint is computed from the same parts ``LoadedTokenizer.fingerprint`` hashes.
:func:`load_for_decoding` keeps the light tokenizer only when that fingerprint equals one
the batch recorded (or the batch recorded none): when they differ, the full load decides,
so a difference in how the parts were read never becomes a false warning.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from eagle_tui.core.fsio import read_small
from eagle_tui.core.tokenizer.boundaries import BoundaryIds, resolve_boundaries
from eagle_tui.core.tokenizer.fingerprint import vocab_fingerprint
from eagle_tui.core.tokenizer.loader import MAX_TOKENIZER_CONFIG_BYTES, display_name, load_tokenizer

GENERIC_CLASSES = frozenset({"PreTrainedTokenizerFast", "TokenizersBackend"})
"""Tokenizer classes that decode with the backend alone (a model's own class may not)."""
SPECIAL_ATTRIBUTES = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token",
                      "cls_token", "mask_token")
"""The named special tokens ``transformers`` lists in ``special_tokens_map``."""


class DecodingTokenizer(Protocol):
    """What reading rows back uses of a tokenizer (``LoadedTokenizer`` has it all)."""

    name: str
    path: Path

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = False) -> str: ...

    def id_to_token(self, token_id: int) -> str | None: ...

    def boundary_ids(self, overrides: Mapping[str, int] | None = None) -> BoundaryIds: ...

    def fingerprint(self) -> str: ...


class LightTokenizer:
    """A ``tokenizer.json`` loaded by ``tokenizers`` alone, for decoding."""

    def __init__(self, backend: Any, path: Path, config: Mapping[str, Any]) -> None:
        self._backend = backend
        self.path = path
        self.name = display_name(path)
        self._specials = _special_tokens(config)
        self._fingerprint = ""

    def __repr__(self) -> str:
        return f"LightTokenizer(name={self.name!r}, path={str(self.path)!r})"

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        """Text of ``ids`` (what the stock fast tokenizer's ``decode`` returns)."""
        return str(self._backend.decode(list(ids), skip_special_tokens=skip_special_tokens))

    def token_id(self, name: str) -> int | None:
        """Id of the token whose text is exactly ``name``, or None."""
        tid = self._backend.token_to_id(name)
        return tid if isinstance(tid, int) else None

    def id_to_token(self, token_id: int) -> str | None:
        """Text of the token with id ``token_id``, or None when no token has it."""
        if token_id < 0:
            return None
        token = self._backend.id_to_token(token_id)
        return token if isinstance(token, str) else None

    def eos_id(self) -> int | None:
        """The id of the configured eos token, if it has one."""
        eos = self._specials.get("eos_token")
        return self.token_id(eos) if eos is not None else None

    def boundary_ids(self, overrides: Mapping[str, int] | None = None) -> BoundaryIds:
        """Think, end-of-think, stop and tool-call ids, by token name (as ``LoadedTokenizer``)."""
        return resolve_boundaries(self.token_id, self.eos_id(), overrides)

    def fingerprint(self) -> str:
        """sha256 over the vocabulary, the added tokens and the named special tokens."""
        if not self._fingerprint:
            vocab = {str(k): int(v)
                     for k, v in self._backend.get_vocab(with_added_tokens=True).items()}
            added = [(int(tid), str(token.content), bool(token.special))
                     for tid, token in self._backend.get_added_tokens_decoder().items()]
            self._fingerprint = vocab_fingerprint(vocab, added, self._specials)
        return self._fingerprint


def light_tokenizer(directory: Path) -> LightTokenizer | None:
    """The light tokenizer of ``directory``, or None when it needs ``transformers`` (see the
    module docstring) or does not read."""
    config = _config(directory)
    if config is None or "auto_map" in config or config.get("clean_up_tokenization_spaces"):
        return None
    if config.get("tokenizer_class", "PreTrainedTokenizerFast") not in GENERIC_CLASSES:
        return None
    from tokenizers import Tokenizer  # light: the Rust library alone

    try:
        backend = Tokenizer.from_file(str(directory / "tokenizer.json"))
    except Exception:  # any failure: the full load says what is wrong
        return None
    return LightTokenizer(backend, directory.resolve(), config)


def load_for_decoding(path: Path, *, trust_remote_code: bool = False,
                      recorded: Collection[str] = ()) -> DecodingTokenizer:
    """A tokenizer to decode stored rows with: the light one when it qualifies and its
    fingerprint is among ``recorded`` (or nothing was recorded), else ``load_tokenizer``.
    Raises TokenizerError as ``load_tokenizer`` does."""
    light = light_tokenizer(Path(path).expanduser())
    wanted = {fingerprint for fingerprint in recorded if fingerprint}
    if light is not None and (not wanted or light.fingerprint() in wanted):
        return light
    return load_tokenizer(path, trust_remote_code=trust_remote_code)


def _config(directory: Path) -> dict[str, Any] | None:
    """``tokenizer_config.json`` (``{}`` when absent), or None when it does not read."""
    if not (directory / "tokenizer.json").is_file():
        return None
    try:
        data = json.loads(read_small(directory / "tokenizer_config.json",
                                     MAX_TOKENIZER_CONFIG_BYTES, "tokenizer config"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError):  # UnfitFile too
        return None
    return data if isinstance(data, dict) else None


def _special_tokens(config: Mapping[str, Any]) -> dict[str, str]:
    """The named special tokens (``bos_token`` …) as ``transformers`` lists them."""
    found: dict[str, str] = {}
    for name in SPECIAL_ATTRIBUTES:
        value = config.get(name)
        if isinstance(value, Mapping):
            value = value.get("content")
        if isinstance(value, str):
            found[name] = value
    return found
