"""Reading rows back without ``transformers`` (issue 39 item 10): ``tokenizers`` alone decodes,
names tokens, resolves boundaries and fingerprints exactly as the full load does, ``inspect``
uses it without importing ``transformers``, and a directory it cannot vouch for, or a
fingerprint it does not match, goes through the full load."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_inspect_cli import batch, tokenizer  # noqa: F401  (fixtures: a captured batch)

from eagle_tui.core.tokenizer import LoadedTokenizer, bundled_tokenizer_path
from eagle_tui.core.tokenizer.light import LightTokenizer, light_tokenizer, load_for_decoding


def test_the_light_tokenizer_reads_the_bundled_one_as_transformers_does(
    tokenizer: LoadedTokenizer,  # noqa: F811
) -> None:
    light = light_tokenizer(bundled_tokenizer_path())
    assert isinstance(light, LightTokenizer)
    assert light.fingerprint() == tokenizer.fingerprint()
    assert light.boundary_ids() == tokenizer.boundary_ids()
    assert light.eos_id() == tokenizer.eos_id()
    ids = sorted(set(tokenizer.hf.get_vocab().values()))
    assert all(light.id_to_token(i) == tokenizer.id_to_token(i) for i in [*ids, -1, 10**9])
    rng = random.Random(39)
    for _ in range(500):
        sequence = [rng.choice(ids) for _ in range(rng.randint(1, 60))]
        assert light.decode(sequence) == tokenizer.decode(sequence), sequence


def copy_with_config(tmp_path: Path, **changes: object) -> Path:
    directory = tmp_path / "tok"
    shutil.copytree(bundled_tokenizer_path(), directory)
    config_path = directory / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    config.update(changes)
    config_path.write_text(json.dumps(config))
    return directory


@pytest.mark.parametrize("changes", [
    {"auto_map": {"AutoTokenizer": ["tokenization_kimi.TikTokenTokenizer", None]}},
    {"clean_up_tokenization_spaces": True},
    {"tokenizer_class": "Qwen2Tokenizer"},
])
def test_a_tokenizer_it_cannot_vouch_for_goes_through_transformers(
    tmp_path: Path, changes: dict[str, object]
) -> None:
    assert light_tokenizer(copy_with_config(tmp_path, **changes)) is None


def test_a_fingerprint_it_does_not_match_goes_through_transformers(tmp_path: Path) -> None:
    directory = copy_with_config(tmp_path)
    assert isinstance(load_for_decoding(directory), LightTokenizer)  # nothing recorded
    light = light_tokenizer(directory)
    assert light is not None
    assert isinstance(load_for_decoding(directory, recorded={light.fingerprint()}),
                      LightTokenizer)
    assert isinstance(load_for_decoding(directory, recorded={"0" * 64}), LoadedTokenizer)


def test_inspect_of_one_sample_imports_no_transformers(batch: Path) -> None:  # noqa: F811
    program = ("import sys\n"
               "from eagle_tui.tui.cli.main import main\n"
               "status = main(['inspect', sys.argv[1], '--index', '1'])\n"
               "print('transformers imported:', 'transformers' in sys.modules)\n"
               "raise SystemExit(status)\n")
    light = subprocess.run([sys.executable, "-c", program, str(batch)], capture_output=True,
                           text=True, env={**os.environ, "NO_COLOR": "1"},
                           check=True)
    assert light.stdout.rstrip().endswith("transformers imported: False"), light.stdout
    assert "warning" not in light.stderr  # the fingerprint matched the recorded one
    full = subprocess.run([sys.executable, "-c",
                           "import eagle_tui.core.tokenizer.light as light\n"
                           "light.light_tokenizer = lambda directory: None\n" + program,
                           str(batch)], capture_output=True, text=True,
                          env={**os.environ, "NO_COLOR": "1"}, check=True)
    assert full.stdout.rstrip().endswith("transformers imported: True")
    assert light.stdout.splitlines()[:-1] == full.stdout.splitlines()[:-1]  # the same text
