"""The bundled Kimi-K2.5-shaped tokenizer, loaded for real through transformers' AutoTokenizer."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from eagle_tui.core import kimi
from eagle_tui.core.errors import ConfigError, TokenizerError
from eagle_tui.core.tokenizer import LoadedTokenizer, bundled_tokenizer_path, load_tokenizer

# (id, text, special flag) of Kimi-K2's tokenizer_config.json (core/kimi.py has the ids).
KIMI_SPECIALS = [
    (163584, "[BOS]", True),
    (163585, "[EOS]", True),
    (163586, "<|im_end|>", True),
    (163587, "<|im_user|>", True),
    (163588, "<|im_assistant|>", True),
    (163590, "<|start_header_id|>", True),
    (163591, "<|end_header_id|>", True),
    (163593, "[EOT]", True),
    (163594, "<|im_system|>", True),
    (163595, "<|tool_calls_section_begin|>", False),
    (163596, "<|tool_calls_section_end|>", False),
    (163597, "<|tool_call_begin|>", False),
    (163598, "<|tool_call_argument_begin|>", False),
    (163599, "<|tool_call_end|>", False),
    (163601, "<|im_middle|>", True),
    (163602, "<|media_begin|>", True),
    (163603, "<|media_content|>", True),
    (163604, "<|media_end|>", True),
    (163605, "<|media_pad|>", True),
    (163606, "<think>", False),
    (163607, "</think>", False),
    (163838, "[UNK]", True),
    (163839, "[PAD]", True),
]

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather for a city",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    }
]

CALL_ID = "functions.get_weather:0"
HISTORY = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Hi"},
    {"role": "assistant", "content": "Hello!", "reasoning_content": "greet them"},
    {"role": "user", "content": "Weather in Paris?"},
    {
        "role": "assistant",
        "content": "",
        "reasoning_content": "need the tool",
        "tool_calls": [
            {
                "id": CALL_ID,
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": CALL_ID, "content": "Sunny, 21 C"},
]
USER = [{"role": "user", "content": "What is the weather in Paris?"}]


@pytest.fixture(scope="module")
def tok() -> LoadedTokenizer:
    return load_tokenizer(bundled_tokenizer_path())


def plain_ids(tok: LoadedTokenizer, text: str) -> list[int]:
    return list(tok.hf.encode(text, add_special_tokens=False))


# -- loading ---------------------------------------------------------------------------------


def test_bundled_loads_through_auto_tokenizer(tok: LoadedTokenizer) -> None:
    import transformers

    assert isinstance(tok.hf, transformers.PreTrainedTokenizerBase)
    assert tok.hf.is_fast
    assert tok.name == "kimi-k2.5-tiny"
    assert tok.path == bundled_tokenizer_path().resolve()
    assert tok.hf.eos_token == "[EOS]"
    assert tok.hf.bos_token_id == kimi.BOS
    assert tok.hf.pad_token_id == kimi.PAD


def test_bundled_assets_are_small_and_describe_the_model() -> None:
    root = bundled_tokenizer_path()
    assert (root / "tokenizer.json").stat().st_size < 400_000
    config = json.loads((root / "config.json").read_text())
    assert config["vocab_size"] == kimi.VOCAB_SIZE
    assert config["eos_token_id"] == kimi.IM_END
    assert config["bos_token_id"] == kimi.BOS
    assert "stand-in" in config["_note"]
    generation = json.loads((root / "generation_config.json").read_text())
    assert generation["eos_token_id"] == kimi.IM_END


@pytest.mark.parametrize(("tid", "text", "special"), KIMI_SPECIALS)
def test_special_id_round_trips(tok: LoadedTokenizer, tid: int, text: str, special: bool) -> None:
    assert plain_ids(tok, text) == [tid]
    assert tok.decode([tid]) == text
    assert tok.token_id(text) == tid
    assert tok.id_to_token(tid) == text
    assert tok.hf.added_tokens_decoder[tid].special is special


def test_reserved_range_is_filled_and_round_trips(tok: LoadedTokenizer) -> None:
    named = {tid for tid, _, _ in KIMI_SPECIALS}
    for tid in range(163584, 163840):
        text = tok.id_to_token(tid)
        assert text is not None
        if tid not in named:
            assert text == f"<|reserved_token_{tid}|>"
        assert plain_ids(tok, text) == [tid]


def test_specials_inside_text_stay_single_tokens(tok: LoadedTokenizer) -> None:
    ids = plain_ids(tok, "a<think>b</think>c<|im_end|>")
    assert kimi.THINK in ids and kimi.THINK_END in ids and ids[-1] == kimi.IM_END
    assert tok.decode(ids) == "a<think>b</think>c<|im_end|>"


def test_skip_special_tokens_keeps_think_and_tool_tokens(tok: LoadedTokenizer) -> None:
    tool_section = "".join(kimi.TOOL_CALL_TOKENS)
    text = f"<think>why</think>ok{tool_section}<|im_end|>"
    ids = plain_ids(tok, text)
    assert kimi.IM_END in ids and set(ids) >= kimi.TOOL_CALL_IDS
    assert tok.decode(ids, skip_special_tokens=True) == f"<think>why</think>ok{tool_section}"
    assert tok.decode(ids, skip_special_tokens=False) == text


def test_unknown_names_and_ids_are_none(tok: LoadedTokenizer) -> None:
    assert tok.token_id("<|no_such_token|>") is None  # never the unk id
    assert tok.id_to_token(100_000) is None
    assert tok.id_to_token(-1) is None


# -- chat template ---------------------------------------------------------------------------


def test_user_prompt_ends_with_the_think_token(tok: LoadedTokenizer) -> None:
    ids = tok.render(USER)
    tail = [kimi.IM_ASSISTANT, *plain_ids(tok, "assistant"), kimi.IM_MIDDLE, kimi.THINK]
    assert ids[-len(tail) :] == tail
    assert plain_ids(tok, "assistant") == [tok.token_id("assistant")]  # one token, as in Kimi


def test_thinking_off_closes_the_think_block(tok: LoadedTokenizer) -> None:
    ids = tok.render(USER, thinking=False)
    assert ids[-3:] == [kimi.IM_MIDDLE, kimi.THINK, kimi.THINK_END]
    assert tok.render_text(USER, thinking=False).endswith("<|im_middle|><think></think>")


def test_default_system_message_only_when_none_given(tok: LoadedTokenizer) -> None:
    default = (
        "<|im_system|>system<|im_middle|>You are Kimi, an AI assistant created by Moonshot AI."
    )
    assert tok.render_text(USER).startswith(default + "<|im_end|><|im_user|>user<|im_middle|>")
    own = tok.render_text([{"role": "system", "content": "Be brief."}, *USER])
    assert own.startswith("<|im_system|>system<|im_middle|>Be brief.<|im_end|><|im_user|>")
    assert "Moonshot" not in own


def test_tools_are_declared_once_as_compact_json(tok: LoadedTokenizer) -> None:
    text = tok.render_text(USER, tools=TOOLS)
    compact = json.dumps(TOOLS, separators=(",", ":"))
    block = f"<|im_system|>tool_declare<|im_middle|>{compact}<|im_end|>"
    assert text.startswith(block + "<|im_system|>system<|im_middle|>")
    assert text.count("tool_declare") == 1
    ids = tok.render(USER, tools=TOOLS)
    assert ids[0] == kimi.IM_SYSTEM
    assert ids[1 : ids.index(kimi.IM_MIDDLE)] == plain_ids(tok, "tool_declare")
    assert "tool_declare" not in tok.render_text(USER)


def test_history_drops_reasoning_up_to_the_last_plain_answer(tok: LoadedTokenizer) -> None:
    text = tok.render_text(HISTORY, tools=TOOLS)
    assert "<|im_assistant|>assistant<|im_middle|><think></think>Hello!<|im_end|>" in text
    assert "greet them" not in text
    call = (
        "<|im_assistant|>assistant<|im_middle|><think>need the tool</think>"
        f"<|tool_calls_section_begin|><|tool_call_begin|>{CALL_ID}<|tool_call_argument_begin|>"
        '{"city": "Paris"}<|tool_call_end|><|tool_calls_section_end|><|im_end|>'
    )
    assert call in text
    result = f"<|im_system|>tool<|im_middle|>## Return of {CALL_ID}\nSunny, 21 C<|im_end|>"
    assert text.endswith(result + "<|im_assistant|>assistant<|im_middle|><think>")


def test_reasoning_after_the_last_plain_answer_only(tok: LoadedTokenizer) -> None:
    messages = [
        *USER,
        {"role": "assistant", "content": "A1", "reasoning_content": "r1"},
        {"role": "user", "content": "more"},
        {"role": "assistant", "content": "A2", "reasoning_content": "r2"},
        {"role": "user", "content": "again"},
    ]
    text = tok.render_text(messages)
    assert "<think></think>A1" in text and "<think></think>A2" in text
    assert "r1" not in text and "r2" not in text


def test_tool_call_arguments_as_dict_and_id_fallback(tok: LoadedTokenizer) -> None:
    call = {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Rome"}}}
    messages = [*USER, {"role": "assistant", "content": None, "tool_calls": [call]}]
    text = tok.render_text(messages)
    assert (
        '<|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{"city":"Rome"}'
        in text
    )


def test_content_parts_are_joined(tok: LoadedTokenizer) -> None:
    parts = [{"type": "text", "text": "Hello"}, {"type": "text", "text": " world"}]
    text = tok.render_text([{"role": "user", "content": parts}])
    assert "<|im_user|>user<|im_middle|>Hello world<|im_end|>" in text


def test_render_ids_match_encoding_the_rendered_text(tok: LoadedTokenizer) -> None:
    assert tok.render(HISTORY, tools=TOOLS) == plain_ids(tok, tok.render_text(HISTORY, tools=TOOLS))


CHATS = [(USER, None, {}), (USER, TOOLS, {}), (HISTORY, TOOLS, {}), (HISTORY, None, {}),
         (USER, TOOLS, {"thinking": False}), (HISTORY, TOOLS, {"thinking": False})]


@pytest.mark.parametrize(("messages", "tools", "kwargs"), CHATS)
def test_direct_render_equals_apply_chat_template(
    tok: LoadedTokenizer, messages: Any, tools: Any, kwargs: dict[str, Any]
) -> None:
    assert tok._direct.usable(kwargs)  # the bundled tokenizer takes the direct path
    stock = tok._render_stock(messages, tools, **kwargs)
    assert tok._direct.encode(tok.render_text(messages, tools, **kwargs)) == stock
    assert tok.render(messages, tools, **kwargs) == stock


def test_a_direct_mismatch_falls_back_for_good(monkeypatch: pytest.MonkeyPatch) -> None:
    fresh = load_tokenizer(bundled_tokenizer_path())
    stock = fresh._render_stock(HISTORY, TOOLS)
    monkeypatch.setattr(fresh._direct, "encode", lambda text: [1, 2, 3])
    assert fresh.render(HISTORY, TOOLS) == stock
    assert not fresh._direct.usable({})
    assert fresh.render(HISTORY, TOOLS) == stock


def test_direct_path_stands_aside_when_tokenizing_is_configured(tok: LoadedTokenizer) -> None:
    assert not tok._direct.usable({"tokenizer_kwargs": {}})  # an apply_chat_template option
    backend = tok.hf.backend_tokenizer
    backend.enable_truncation(max_length=4)
    try:
        assert not tok._direct.usable({})
        assert tok.render(USER) == tok._render_stock(USER)  # the stock call resets it
    finally:
        backend.no_truncation()
    assert tok._direct.usable({})


class ShapeWrapper:
    """A real tokenizer whose apply_chat_template returns a chosen shape of the same ids."""

    def __init__(self, inner: Any, shape: str) -> None:
        self._inner = inner
        self._shape = shape

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def apply_chat_template(self, *args: Any, **kwargs: Any) -> Any:
        out = self._inner.apply_chat_template(*args, **kwargs)
        if not kwargs.get("tokenize"):
            return out
        ids = list(out["input_ids"]) if isinstance(out, Mapping) else list(out)
        if self._shape == "list":
            return ids
        if self._shape == "dict":
            return {"input_ids": ids, "attention_mask": [1] * len(ids)}
        if self._shape == "batch_encoding":
            import transformers

            return transformers.BatchEncoding({"input_ids": ids})
        return {"input_ids": [ids]}  # a batch of one


@pytest.mark.parametrize("shape", ["list", "dict", "batch_encoding", "batch_of_one"])
def test_both_apply_chat_template_shapes(tok: LoadedTokenizer, shape: str) -> None:
    wrapped = LoadedTokenizer(ShapeWrapper(tok.hf, shape), tok.path)
    assert wrapped.render(HISTORY, tools=TOOLS) == tok.render(HISTORY, tools=TOOLS)


def test_odd_return_shape_is_a_tokenizer_error(tok: LoadedTokenizer) -> None:
    class Odd(ShapeWrapper):
        def apply_chat_template(self, *args: Any, **kwargs: Any) -> Any:
            return {"ids": [1, 2]}

    with pytest.raises(TokenizerError, match="input_ids"):
        LoadedTokenizer(Odd(tok.hf, "odd"), tok.path).render(USER)


def test_template_failure_is_a_tokenizer_error(tok: LoadedTokenizer) -> None:
    with pytest.raises(TokenizerError, match=re.escape(str(tok.path))):
        tok.render([])  # transformers refuses an empty conversation


# -- bounds, boundaries, fingerprints ----------------------------------------------------------


def test_boundary_ids_resolve_by_name(tok: LoadedTokenizer) -> None:
    b = tok.boundary_ids()
    assert b.think == kimi.THINK and b.think_end == kimi.THINK_END
    assert b.stop == (kimi.IM_END, kimi.EOS)  # <|im_end|>, then the tokenizer's eos ([EOS])
    assert b.tool_call == kimi.TOOL_CALL_IDS
    assert b.missing() == () and b.unresolved == ()


def test_boundary_overrides(tok: LoadedTokenizer) -> None:
    b = tok.boundary_ids({"think": 7, "</think>": 8, "stop": kimi.EOS, "tool_call_end": 9})
    assert (b.think, b.think_end, b.stop) == (7, 8, (kimi.EOS,))
    assert 9 in b.tool_call and kimi.TOOL_CALL_END not in b.tool_call
    with pytest.raises(ConfigError, match="thinking"):
        tok.boundary_ids({"thinking": 1})
    with pytest.raises(ConfigError, match="non-negative"):
        tok.boundary_ids({"think": -1})


def test_vocab_bound_prefers_config_json(tok: LoadedTokenizer, tmp_path: Path) -> None:
    assert tok.vocab_bound() == kimi.VOCAB_SIZE
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"text_config": {"vocab_size": 200_000}}))
    assert tok.vocab_bound(model) == 200_000  # K2.5 nests vocab_size under text_config
    assert tok.vocab_bound(tmp_path) == kimi.VOCAB_SIZE  # no config there: the tokenizer dir's


@pytest.fixture
def bare_copy(tmp_path: Path) -> Path:
    """The bundled tokenizer without config.json / generation_config.json."""
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(bundled_tokenizer_path() / name, tmp_path / name)
    return tmp_path


def test_vocab_bound_without_config_is_max_id_plus_one(bare_copy: Path) -> None:
    bare = load_tokenizer(bare_copy)
    assert bare.vocab_bound() == 163839 + 1
    assert len(bare.hf) < 5000  # len() counts entries; the ids are sparse


def test_bad_model_config_json_is_a_config_error(tok: LoadedTokenizer, tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ConfigError, match=re.escape(str(tmp_path / "config.json"))):
        tok.vocab_bound(tmp_path)


def test_fingerprint_is_stable_across_loads(tok: LoadedTokenizer, bare_copy: Path) -> None:
    again = load_tokenizer(bundled_tokenizer_path())
    assert again is not tok and again.fingerprint() == tok.fingerprint()
    assert load_tokenizer(bare_copy).fingerprint() == tok.fingerprint()  # same files, other dir
    assert len(tok.fingerprint()) == 64


def test_template_hash_is_sha256_of_the_template(tok: LoadedTokenizer) -> None:
    config = json.loads((bundled_tokenizer_path() / "tokenizer_config.json").read_text())
    expected = hashlib.sha256(config["chat_template"].encode()).hexdigest()
    assert tok.template_hash() == expected


# -- errors ----------------------------------------------------------------------------------


def test_missing_directory_names_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-model"
    with pytest.raises(TokenizerError, match=re.escape(f"{missing} does not exist")):
        load_tokenizer(missing)


def test_file_instead_of_directory(tmp_path: Path) -> None:
    file = tmp_path / "tokenizer.json"
    file.write_text("{}")
    with pytest.raises(TokenizerError, match="is a file, not a directory"):
        load_tokenizer(file)


def test_directory_without_tokenizer(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(TokenizerError, match=re.escape(f"no tokenizer in {tmp_path}")):
        load_tokenizer(tmp_path)


def test_broken_tokenizer_json(bare_copy: Path) -> None:
    (bare_copy / "tokenizer.json").write_text('{"model": ')
    with pytest.raises(
        TokenizerError, match=re.escape(f"cannot load the tokenizer in {bare_copy}")
    ):
        load_tokenizer(bare_copy)


def test_custom_code_hint_without_trust_remote_code(bare_copy: Path) -> None:
    config_path = bare_copy / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    config.pop("tokenizer_class")
    config["auto_map"] = {"AutoTokenizer": ["tokenization_kimi.TikTokenTokenizer", None]}
    config_path.write_text(json.dumps(config))
    (bare_copy / "tokenizer.json").unlink()
    with pytest.raises(TokenizerError, match="trust_remote_code=True"):
        load_tokenizer(bare_copy)
