"""Tokenizer helpers that need no tokenizer: boundaries, return shapes, config, the build."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from eagle_tui.core import kimi
from eagle_tui.core.errors import ConfigError, TokenizerError
from eagle_tui.core.tokenizer import BoundaryIds, bundled_tokenizer_path, resolve_boundaries
from eagle_tui.core.tokenizer.fingerprint import template_fingerprint, vocab_fingerprint
from eagle_tui.core.tokenizer.modelconfig import config_vocab_size, first_vocab_size
from eagle_tui.core.tokenizer.shapes import as_id_list

ROOT = Path(__file__).resolve().parent.parent
NAMES = {
    kimi.THINK_TOKEN: kimi.THINK,
    kimi.THINK_END_TOKEN: kimi.THINK_END,
    kimi.STOP_TOKEN: kimi.IM_END,
    **dict(zip(kimi.TOOL_CALL_TOKENS, sorted(kimi.TOOL_CALL_IDS), strict=True)),
}


def test_resolve_all_names() -> None:
    b = resolve_boundaries(NAMES.get, eos_id=kimi.EOS)
    assert b == BoundaryIds(kimi.THINK, kimi.THINK_END, (kimi.IM_END, kimi.EOS), kimi.TOOL_CALL_IDS)


def test_eos_equal_to_turn_end_is_not_repeated() -> None:
    assert resolve_boundaries(NAMES.get, eos_id=kimi.IM_END).stop == (kimi.IM_END,)


def test_missing_names_do_not_crash() -> None:
    b = resolve_boundaries({}.get, eos_id=None)
    assert b == BoundaryIds(None, None, (), frozenset(), b.unresolved)
    assert b.missing() == ("think", "think_end", "stop", "tool_call")
    assert set(b.unresolved) == set(NAMES)


def test_override_fills_a_missing_name() -> None:
    b = resolve_boundaries({}.get, eos_id=None, overrides={"think": 5, "<|im_end|>": 6})
    assert (b.think, b.stop) == (5, (6,))
    assert "<think>" not in b.unresolved


@pytest.mark.parametrize("bad", [True, 1.5, "7", -2])
def test_bad_override_values(bad: object) -> None:
    with pytest.raises(ConfigError, match="'think'"):
        resolve_boundaries(NAMES.get, None, {"think": bad})  # type: ignore[dict-item]


def test_as_dict_is_json_ready() -> None:
    b = resolve_boundaries(NAMES.get, eos_id=kimi.EOS)
    assert json.loads(json.dumps(b.as_dict()))["tool_call"] == sorted(kimi.TOOL_CALL_IDS)


@pytest.mark.parametrize(
    "result",
    [[1, 2, 3], (1, 2, 3), {"input_ids": [1, 2, 3]}, {"input_ids": [[1, 2, 3]]}, [[1, 2, 3]]],
)
def test_id_shapes(result: object) -> None:
    assert as_id_list(result, "here") == [1, 2, 3]


@pytest.mark.parametrize("result", ["text", {"input_ids": ["a"]}, [[1], [2]], 5])
def test_bad_id_shapes(result: object) -> None:
    with pytest.raises(TokenizerError, match="here"):
        as_id_list(result, "here")


def test_config_vocab_size_locations(tmp_path: Path) -> None:
    assert config_vocab_size({"vocab_size": 10}) == 10
    assert config_vocab_size({"text_config": {"vocab_size": 11}}) == 11
    assert config_vocab_size({"vocab_size": True}) is None
    assert first_vocab_size([tmp_path]) is None
    (tmp_path / "config.json").write_text("[1]")
    with pytest.raises(ConfigError, match="not a JSON object"):
        first_vocab_size([tmp_path])


def test_fingerprints() -> None:
    a = vocab_fingerprint({"a": 0, "b": 1}, [(5, "<x>", True)], {"eos_token": "<x>"})
    assert a == vocab_fingerprint({"b": 1, "a": 0}, [(5, "<x>", True)], {"eos_token": "<x>"})
    assert a != vocab_fingerprint({"a": 0, "b": 1}, [(5, "<x>", False)], {"eos_token": "<x>"})
    assert template_fingerprint(None) == ""
    assert template_fingerprint("t") != template_fingerprint({"default": "t"})


def load_build_script() -> ModuleType:
    path = ROOT / "scripts" / "build_kimi_tokenizer.py"
    spec = importlib.util.spec_from_file_location("build_kimi_tokenizer", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_bundled_assets_rebuild_identically() -> None:
    note = json.loads((bundled_tokenizer_path() / "config.json").read_text())["_note"]
    python = ".".join(map(str, sys.version_info[:3]))
    if f"Python {python}'s" not in note:
        pytest.skip(f"assets were built with another Python ({note!r}); the corpus differs")
    files = load_build_script().build()
    for name, text in files.items():
        assert (bundled_tokenizer_path() / name).read_text(encoding="utf-8") == text, name
