"""The model directory the sim serves: ``tokenizer.json`` and ``config.json``.

Only the light ``tokenizers`` library is used (no ``transformers``). Boundary
tokens are looked up by name, so any tokenizer works; with Kimi's they land on
Kimi's real ids. ``vocab_size``, EOS and the context length come from
``config.json`` (top level or ``text_config``, as in Kimi-K2.5), like SGLang.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer

from eagle_tui.core import kimi
from eagle_tui.core.errors import ConfigError
from eagle_tui.core.sim.config import DEFAULT_CONTEXT_LENGTH
from eagle_tui.core.tokenizer.modelconfig import read_model_config


@dataclass(frozen=True)
class SpecialIds:
    """Ids of the chat-format tokens the fake model reads and writes (None: absent)."""

    think: int | None
    think_end: int | None
    im_system: int | None
    im_user: int | None
    im_middle: int | None
    im_end: int | None
    section_begin: int | None
    section_end: int | None
    call_begin: int | None
    argument_begin: int | None
    call_end: int | None

    @property
    def has_tool_tokens(self) -> bool:
        """True when all five Kimi tool-call tokens exist."""
        ids = (self.section_begin, self.section_end, self.call_begin, self.argument_begin,
               self.call_end)
        return all(i is not None for i in ids)


@dataclass(frozen=True)
class ModelDir:
    """A loaded model directory."""

    path: Path
    tokenizer: Any  # tokenizers.Tokenizer (untyped library)
    config: dict[str, Any]
    vocab_size: int
    eos_ids: tuple[int, ...]
    context_length: int
    special: SpecialIds

    @property
    def model_type(self) -> str | None:
        """``model_type`` from config.json."""
        value = self.config.get("model_type")
        return value if isinstance(value, str) else None

    @property
    def architectures(self) -> list[str]:
        """``architectures`` from config.json."""
        value = self.config.get("architectures")
        return [str(a) for a in value] if isinstance(value, list) else []

    def encode(self, text: str) -> list[int]:
        """Ids of ``text`` without special tokens added."""
        ids: list[int] = self.tokenizer.encode(text, add_special_tokens=False).ids
        return ids

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        """Text of ``ids``; ids the tokenizer does not know decode to nothing."""
        text: str = self.tokenizer.decode(ids, skip_special_tokens=skip_special_tokens)
        return text


def load_model_dir(path: Path) -> ModelDir:
    """Load ``path``; raises ConfigError naming the file when it cannot be used."""
    tokenizer_file = path / "tokenizer.json"
    if not tokenizer_file.is_file():
        raise ConfigError(f"no tokenizer.json in {path}; pass --model-path DIR with one")
    try:
        tokenizer = Tokenizer.from_file(str(tokenizer_file))
    except Exception as e:  # the library raises plain Exception for bad files
        raise ConfigError(f"cannot load {tokenizer_file}: {e}") from e
    config = read_model_config(path) or {}
    text_config = config.get("text_config") if isinstance(config.get("text_config"), dict) else {}
    return ModelDir(
        path=path,
        tokenizer=tokenizer,
        config=config,
        vocab_size=_first_int(config, text_config, "vocab_size") or _largest_id(tokenizer) + 1,
        eos_ids=_eos_ids(config, text_config, tokenizer),
        context_length=(_first_int(config, text_config, "max_position_embeddings")
                        or DEFAULT_CONTEXT_LENGTH),
        special=_special_ids(tokenizer),
    )


def _first_int(config: dict[str, Any], text_config: Any, key: str) -> int | None:
    for section in (config, text_config):
        value = section.get(key) if isinstance(section, dict) else None
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def _eos_ids(config: dict[str, Any], text_config: Any, tokenizer: Any) -> tuple[int, ...]:
    for section in (config, text_config):
        value = section.get("eos_token_id") if isinstance(section, dict) else None
        if isinstance(value, int) and not isinstance(value, bool):
            return (value,)
        if isinstance(value, list) and value and all(isinstance(v, int) for v in value):
            return tuple(value)
    fallback = tokenizer.token_to_id(kimi.STOP_TOKEN)
    return (fallback,) if fallback is not None else ()


def _largest_id(tokenizer: Any) -> int:
    vocab: dict[str, int] = tokenizer.get_vocab(with_added_tokens=True)
    return max(vocab.values(), default=0)


def _special_ids(tokenizer: Any) -> SpecialIds:
    def lookup(name: str) -> int | None:
        found = tokenizer.token_to_id(name)
        return found if isinstance(found, int) else None

    begin, end, call, argument, call_end = (lookup(n) for n in kimi.TOOL_CALL_TOKENS)
    return SpecialIds(
        think=lookup(kimi.THINK_TOKEN),
        think_end=lookup(kimi.THINK_END_TOKEN),
        im_system=lookup("<|im_system|>"),
        im_user=lookup("<|im_user|>"),
        im_middle=lookup("<|im_middle|>"),
        im_end=lookup(kimi.STOP_TOKEN),
        section_begin=begin,
        section_end=end,
        call_begin=call,
        argument_begin=argument,
        call_end=call_end,
    )
