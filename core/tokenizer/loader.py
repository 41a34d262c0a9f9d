"""Loading a local Hugging Face tokenizer and using it the way capture needs.

``load_tokenizer`` reads a LOCAL directory only (never the Hub) and returns a
``LoadedTokenizer``: chat-template rendering to ids, decoding, token-name lookups, the
boundary ids, the vocabulary bound and stable fingerprints. ``transformers`` is imported
only when a tokenizer is loaded.
"""

from __future__ import annotations

import functools
import inspect
import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from eagle_tui.core.errors import TokenizerError
from eagle_tui.core.fsio import MIB, read_small
from eagle_tui.core.tokenizer._hf import transformers_module
from eagle_tui.core.tokenizer.boundaries import BoundaryIds, resolve_boundaries
from eagle_tui.core.tokenizer.fingerprint import template_fingerprint, vocab_fingerprint
from eagle_tui.core.tokenizer.modelconfig import first_vocab_size
from eagle_tui.core.tokenizer.shapes import as_id_list

log = logging.getLogger(__name__)

BUNDLED_TOKENIZER_NAME = "kimi-k2.5-tiny"
MAX_TOKENIZER_CONFIG_BYTES = 64 * MIB  # added_tokens_decoder can list every special token

# Any of these marks a directory as holding a tokenizer.
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "tokenizer.model",
    "tiktoken.model",
    "vocab.json",
)

Message = Mapping[str, Any]


def bundled_tokenizer_path() -> Path:
    """Directory of the bundled tiny Kimi-K2.5-shaped tokenizer (Kimi's special-token ids)."""
    return Path(__file__).resolve().parent / "assets" / BUNDLED_TOKENIZER_NAME


def load_tokenizer(path: str | Path, *, trust_remote_code: bool = False) -> LoadedTokenizer:
    """Load the tokenizer in the local directory ``path`` through ``AutoTokenizer``.

    ``trust_remote_code`` lets a checkpoint's own tokenizer code run (Kimi's real tokenizer
    needs it). Raises TokenizerError naming the directory when it is missing, holds no
    tokenizer, or cannot be loaded.
    """
    directory = _check_directory(Path(path).expanduser())
    auto = transformers_module().AutoTokenizer
    try:
        hf = auto.from_pretrained(
            str(directory), trust_remote_code=trust_remote_code, local_files_only=True
        )
    except Exception as e:  # third-party boundary: any failure means "cannot load"
        raise TokenizerError(
            f"cannot load the tokenizer in {directory}: {type(e).__name__}: {e}; "
            f"{_load_hint(directory, trust_remote_code)}"
        ) from e
    return LoadedTokenizer(hf, directory)


def _check_directory(directory: Path) -> Path:
    """The resolved directory, or TokenizerError saying what is wrong with it."""
    if not directory.exists():
        raise TokenizerError(
            f"tokenizer directory {directory} does not exist; pass the model or tokenizer "
            "directory (the one holding tokenizer_config.json)"
        )
    if not directory.is_dir():
        raise TokenizerError(
            f"tokenizer path {directory} is a file, not a directory; pass the directory "
            "that holds it"
        )
    if not any((directory / name).is_file() for name in TOKENIZER_FILES):
        raise TokenizerError(
            f"no tokenizer in {directory} (looked for {', '.join(TOKENIZER_FILES)}); "
            "pass the model's directory or a tokenizer directory"
        )
    return directory.resolve()


def _load_hint(directory: Path, trust_remote_code: bool) -> str:
    """What to try after a failed load."""
    if not trust_remote_code and _names_custom_code(directory):
        return (
            "its tokenizer_config.json names custom tokenizer code (auto_map); allow it with "
            "trust_remote_code=True (--trust-remote-code) if you trust that directory"
        )
    return "check that the directory holds a complete Hugging Face tokenizer"


def _names_custom_code(directory: Path) -> bool:
    """True when the tokenizer config asks for code shipped with the checkpoint."""
    try:
        config = json.loads(read_small(directory / "tokenizer_config.json",
                                       MAX_TOKENIZER_CONFIG_BYTES, "tokenizer config"))
    except (OSError, ValueError):  # UnfitFile too: transformers then says what is wrong
        return False
    return isinstance(config, dict) and "auto_map" in config


def display_name(directory: Path) -> str:
    """A short name: the directory, or ``org/name`` for a Hub cache snapshot."""
    if directory.parent.name == "snapshots" and directory.parent.parent.name.startswith("models--"):
        return directory.parent.parent.name.removeprefix("models--").replace("--", "/")
    return directory.name


class LoadedTokenizer:
    """A loaded Hugging Face tokenizer with the operations capture and inspection use.

    ``hf`` is the underlying ``transformers`` tokenizer, for anything not wrapped here.
    """

    def __init__(self, hf: Any, path: Path) -> None:
        """Wrap ``hf``, loaded from the directory ``path``."""
        self.hf: Any = hf
        self.path = path
        self.name = display_name(path)

    def __repr__(self) -> str:
        return f"LoadedTokenizer(name={self.name!r}, path={str(self.path)!r})"

    # -- chat template ---------------------------------------------------------------------

    @property
    def chat_template(self) -> str | None:
        """The chat template text (None when the tokenizer has none)."""
        template = getattr(self.hf, "chat_template", None)
        if template is None or isinstance(template, str):
            return template
        return json.dumps(template, ensure_ascii=False, sort_keys=True)

    def render(
        self,
        messages: Sequence[Message],
        tools: Sequence[Mapping[str, Any]] | None = None,
        **template_kwargs: Any,
    ) -> list[int]:
        """Prompt ids: the chat template applied with the generation prompt, tokenized.

        ``template_kwargs`` reach the template (e.g. ``thinking=False`` for Kimi).
        """
        if not self._direct.usable(template_kwargs):
            return self._render_stock(messages, tools, **template_kwargs)
        ids = self._direct.encode(self.render_text(messages, tools, **template_kwargs))
        if self._direct.checks_left > 0:
            return self._checked(ids, messages, tools, **template_kwargs)
        return ids

    def _render_stock(
        self,
        messages: Sequence[Message],
        tools: Sequence[Mapping[str, Any]] | None = None,
        **template_kwargs: Any,
    ) -> list[int]:
        """``apply_chat_template(tokenize=True)``: the reference the direct path must equal."""
        result = self._apply(messages, tools, tokenize=True, **template_kwargs)
        return as_id_list(result, str(self.path))

    def _checked(
        self,
        ids: list[int],
        messages: Sequence[Message],
        tools: Sequence[Mapping[str, Any]] | None,
        **template_kwargs: Any,
    ) -> list[int]:
        """The stock ids, after comparing ``ids`` (direct) with them; a mismatch turns the
        direct path off for good."""
        self._direct.checks_left -= 1
        stock = self._render_stock(messages, tools, **template_kwargs)
        if stock != ids:
            self._direct.disable(f"direct encoding of {self.path} differs from the chat template's")
        return stock

    @functools.cached_property
    def _direct(self) -> DirectEncoder:
        return DirectEncoder(self.hf)

    def render_text(
        self,
        messages: Sequence[Message],
        tools: Sequence[Mapping[str, Any]] | None = None,
        **template_kwargs: Any,
    ) -> str:
        """The rendered prompt as text (for display; capture uses :meth:`render`)."""
        result = self._apply(messages, tools, tokenize=False, **template_kwargs)
        if not isinstance(result, str):
            raise TokenizerError(
                f"chat template of {self.path} returned {type(result).__name__}, not text"
            )
        return result

    def _apply(
        self,
        messages: Sequence[Message],
        tools: Sequence[Mapping[str, Any]] | None,
        *,
        tokenize: bool,
        **template_kwargs: Any,
    ) -> Any:
        """Call ``apply_chat_template``; template failures become TokenizerError."""
        if getattr(self.hf, "chat_template", None) is None:
            raise TokenizerError(
                f"tokenizer {self.path} has no chat template; use the model's own tokenizer "
                "directory (chat_template in tokenizer_config.json or chat_template.jinja)"
            )
        try:
            return self.hf.apply_chat_template(
                list(messages),
                tools=list(tools) if tools is not None else None,
                add_generation_prompt=True,
                tokenize=tokenize,
                **template_kwargs,
            )
        except Exception as e:  # third-party boundary: Jinja and transformers errors
            raise TokenizerError(
                f"chat template of {self.path} failed: {type(e).__name__}: {e}; "
                "check the messages (roles, content, tool_calls) against the template"
            ) from e

    # -- ids and tokens --------------------------------------------------------------------

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        """Text of ``ids``; ``skip_special_tokens`` drops tokens flagged special."""
        text = self.hf.decode(list(ids), skip_special_tokens=skip_special_tokens)
        return str(text)

    def token_id(self, name: str) -> int | None:
        """Id of the token whose text is exactly ``name``, or None (never the unk id)."""
        backend = getattr(self.hf, "backend_tokenizer", None)
        if backend is not None:
            tid = backend.token_to_id(name)
            return tid if isinstance(tid, int) else None
        return self._vocab().get(name)

    def id_to_token(self, token_id: int) -> str | None:
        """Text of the token with id ``token_id``, or None when no token has it."""
        if token_id < 0:
            return None
        backend = getattr(self.hf, "backend_tokenizer", None)
        if backend is not None:
            token = backend.id_to_token(token_id)
            return token if isinstance(token, str) else None
        return self._inverse_vocab().get(token_id)

    @functools.cached_property
    def _vocab_cache(self) -> dict[str, int]:
        vocab = {str(k): int(v) for k, v in self.hf.get_vocab().items()}
        for tid, added in self._added_tokens().items():
            vocab.setdefault(added[0], tid)
        return vocab

    def _vocab(self) -> dict[str, int]:
        """Every token (including added tokens) -> id, computed once."""
        return self._vocab_cache

    @functools.cached_property
    def _inverse_cache(self) -> dict[int, str]:
        return {tid: token for token, tid in self._vocab().items()}

    def _inverse_vocab(self) -> dict[int, str]:
        """Id -> token text, computed once."""
        return self._inverse_cache

    def _added_tokens(self) -> dict[int, tuple[str, bool]]:
        """Added tokens: id -> (text, special flag)."""
        decoder = getattr(self.hf, "added_tokens_decoder", None) or {}
        return {
            int(tid): (str(tok.content), bool(getattr(tok, "special", False)))
            for tid, tok in decoder.items()
        }

    def eos_id(self) -> int | None:
        """The tokenizer's eos token id, if it has one."""
        eos = getattr(self.hf, "eos_token_id", None)
        return eos if isinstance(eos, int) else None

    # -- boundaries, bounds and fingerprints -----------------------------------------------

    def boundary_ids(self, overrides: Mapping[str, int] | None = None) -> BoundaryIds:
        """Think, end-of-think, stop and tool-call ids, by token name; config overrides win.

        Raises ConfigError for an unknown override key or a bad id.
        """
        return resolve_boundaries(self.token_id, self.eos_id(), overrides)

    def max_token_id(self) -> int:
        """Largest id any token of this tokenizer has."""
        return self._max_id

    @functools.cached_property
    def _max_id(self) -> int:
        ids = list(self._vocab().values()) + list(self._added_tokens())
        return max(ids) if ids else -1

    def vocab_bound(self, model_dir: Path | None = None) -> int:
        """Exclusive upper bound of valid token ids.

        The model's ``config.json`` ``vocab_size`` (``model_dir`` first, then the tokenizer
        directory), else the largest tokenizer id + 1. Not ``len(tokenizer)``: with sparse
        ids (as in the bundled tokenizer) that counts entries, not ids.
        """
        dirs = [model_dir, self.path] if model_dir is not None else [self.path]
        size = first_vocab_size(d for d in dirs if d is not None)
        return size if size is not None else self.max_token_id() + 1

    def fingerprint(self) -> str:
        """sha256 over the vocabulary and the special/added tokens; stable across loads."""
        return self._fingerprint

    @functools.cached_property
    def _fingerprint(self) -> str:
        added = [(tid, text, special) for tid, (text, special) in self._added_tokens().items()]
        special_map = getattr(self.hf, "special_tokens_map", None) or {}
        return vocab_fingerprint(self._vocab(), added, special_map)

    def template_hash(self) -> str:
        """sha256 of the chat template text ("" when there is none)."""
        return template_fingerprint(getattr(self.hf, "chat_template", None))


# -- the direct render path ---------------------------------------------------------------

# Methods on the way from apply_chat_template(tokenize=True) to the Rust encoder; a subclass
# overriding any of them may tokenize differently, so it keeps the stock path.
_TOKENIZE_PATH = (
    "apply_chat_template", "__call__", "_call_one", "encode", "encode_plus", "_encode_plus",
    "_batch_encode_plus", "_convert_encoding",
)
# The first renders of each tokenizer are also done the stock way and compared.
VERIFY_RENDERS = 32


class DirectEncoder:
    """Encodes rendered chat text with the Rust backend, as ``apply_chat_template(
    tokenize=True)`` ends up doing, without ~0.1 ms per call of Python argument handling
    and ``BatchEncoding`` building around it.

    Only when the result is provably the same: a stock fast tokenizer (nothing on the
    tokenize path overridden, no input/target modes), no padding or truncation configured
    on the backend, special-token splitting as the stock call sets it, and no
    apply_chat_template option among the template kwargs. On top of that the caller
    compares the first ``VERIFY_RENDERS`` results with the stock path and calls
    :meth:`disable` on any difference.
    """

    def __init__(self, hf: Any) -> None:
        self._hf = hf
        self._backend = _stock_backend(hf)
        self._options = _chat_template_options(hf) if self._backend is not None else frozenset()
        self.checks_left = VERIFY_RENDERS

    def usable(self, template_kwargs: Mapping[str, Any]) -> bool:
        """True when encoding directly gives the stock ids for these kwargs right now."""
        backend = self._backend
        return (
            backend is not None
            and self._options.isdisjoint(template_kwargs)
            and backend.truncation is None
            and backend.padding is None
            and backend.encode_special_tokens == self._hf.split_special_tokens
        )

    def encode(self, text: str) -> list[int]:
        """Ids of ``text`` with no special tokens added (the template wrote them)."""
        assert self._backend is not None
        # encode_batch_fast (tokenizers >= 0.20.2) skips offset tracking, a fifth of the
        # encoding cost; the ids are the same.
        fast = getattr(self._backend, "encode_batch_fast", None)
        if fast is not None:
            ids: list[int] = fast([text], add_special_tokens=False)[0].ids
            return ids
        return list(self._backend.encode(text, add_special_tokens=False).ids)

    def disable(self, reason: str) -> None:
        """Use the stock path from now on."""
        log.warning("%s; using apply_chat_template(tokenize=True) from now on", reason)
        self._backend = None


def _stock_backend(hf: Any) -> Any:
    """The Rust tokenizer of ``hf`` when ``hf`` tokenizes chats the stock way, else None."""
    backend = getattr(hf, "backend_tokenizer", None)
    if backend is None:  # checked first: a stand-in tokenizer need not import transformers
        return None
    fast = getattr(transformers_module(), "PreTrainedTokenizerFast", None)
    if fast is None or not isinstance(hf, fast):
        return None
    if hasattr(hf, "_switch_to_input_mode") or not hasattr(hf, "split_special_tokens"):
        return None
    cls = type(hf)
    if any(getattr(cls, name, None) is not getattr(fast, name, None) for name in _TOKENIZE_PATH):
        return None
    return backend


def _chat_template_options(hf: Any) -> frozenset[str]:
    """apply_chat_template's own keyword parameters: passed as template kwargs they change
    the call (tokenizer_kwargs, truncation...), not just the template."""
    parameters = inspect.signature(hf.apply_chat_template).parameters.values()
    return frozenset(p.name for p in parameters if p.kind is not p.VAR_KEYWORD)
