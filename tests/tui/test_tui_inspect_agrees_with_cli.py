"""`eagle-tui inspect` (run as a process) and the dashboard's Inspect view (driven with
Textual's pilot) decode the same rows of a batch to the same segments and the same text.

Each batch below is one where they used to disagree:

- ``foreign``: shards captured on another machine (the recorded tokenizer path does not
  exist here) with the bundled tokenizer. The view fell back to the bundled tokenizer by
  its name; the CLI tried the recorded path and refused.
- ``moved``: the tokenizer directory moved and the batch was resumed from the new place
  (resume records the new path in the manifest; the first shard's footer keeps the old
  one). The CLI went by the footer and refused; the view showed raw ids.
- ``partial``: the footer's boundary record lacks ``think`` (a footer written by another
  tool, or edited). The CLI segmented without a think id, the view with Kimi's.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import msgspec
import pytest
from textual.widgets import DataTable
from tui_fakes import FakeCapture, wait_for

from eagle_tui.core import kimi
from eagle_tui.core.capture.batch import prepare_batch
from eagle_tui.core.capture.config import CaptureConfig
from eagle_tui.core.sampling import SamplingIdentity, SamplingPreset
from eagle_tui.core.shards.manifest import BatchConfig, Manifest
from eagle_tui.core.shards.schema import FooterTokenizer, ShardMetadata, ShardRow
from eagle_tui.core.shards.writer import ShardWriter
from eagle_tui.core.tokenizer import LoadedTokenizer, bundled_tokenizer_path, load_tokenizer
from eagle_tui.core.urls import ServerURL
from eagle_tui.core.validate import validate_sample
from eagle_tui.tui.app import EagleApp
from eagle_tui.tui.options import DashboardOptions
from eagle_tui.tui.screens.inspect import InspectScreen
from eagle_tui.tui.screens.sample import SampleScreen
from eagle_tui.tui.sources import Sources
from eagle_tui.tui.sources.tokenizers import TokenizerCache

pytestmark = pytest.mark.slow  # one `eagle-tui inspect` process per row

ROWS = (0, 2)
LEGEND = re.compile(r"^key: .*$", re.MULTILINE)
TOKEN = re.compile(r"(«[a-z_]+»|⟦[^⟧]* \d+⟧)")
Shown = list[tuple[str, object]]


def encode(tokenizer: LoadedTokenizer, text: str) -> list[int]:
    return list(tokenizer.hf.encode(text, add_special_tokens=False))


def rows_for(tokenizer: LoadedTokenizer) -> list[ShardRow]:
    """A tool call, a clean answer and a reasoning cut short, validated for real."""
    tok = tokenizer
    prompt = tok.render([{"role": "user", "content": "Add 2 and 2, then call the tool."}])
    outputs = [
        ([*encode(tok, "Use the tool."), kimi.THINK_END, *encode(tok, "Sure."),
          kimi.TOOL_CALLS_SECTION_BEGIN, kimi.TOOL_CALL_BEGIN, *encode(tok, "functions.add:0"),
          kimi.TOOL_CALL_ARGUMENT_BEGIN, *encode(tok, '{"a":2}'), kimi.TOOL_CALL_END,
          kimi.TOOL_CALLS_SECTION_END, kimi.IM_END], "stop"),
        ([*encode(tok, "Easy."), kimi.THINK_END, *encode(tok, "4"), kimi.IM_END], "stop"),
        (encode(tok, "Hmm, let me think about this for a long"), "length"),
    ]
    boundary = tok.boundary_ids()
    rows = []
    for i, (out, finish) in enumerate(outputs):
        check = validate_sample(prompt, out, finish_kind=finish, completion_tokens=len(out),
                                prompt_tokens=len(prompt), boundary=boundary,
                                vocab_size=tok.vocab_bound())
        rows.append(ShardRow(f"q{i}", prompt + out, len(prompt), finish,
                             kimi.IM_END if finish == "stop" else None, check.think_end,
                             check.flags, "http://sim", f"r{i}", 1.0 + i,
                             datetime(2026, 1, 1, tzinfo=UTC)))
    return rows


def footer(tokenizer: LoadedTokenizer, path: str,
           boundary_ids: dict[str, object] | None = None) -> ShardMetadata:
    return ShardMetadata(
        tokenizer=FooterTokenizer(name=tokenizer.name, path=path,
                                  fingerprint=tokenizer.fingerprint(), vocab_size=163840),
        template_hash=tokenizer.template_hash(),
        boundary_ids=(boundary_ids if boundary_ids is not None
                      else dict(tokenizer.boundary_ids().as_dict())))


def write_batch(directory: Path, tokenizer: LoadedTokenizer, meta: ShardMetadata,
                config: BatchConfig) -> Path:
    with ShardWriter(directory, metadata=meta, manifest=Manifest(directory, config)) as writer:
        for row in rows_for(tokenizer):
            writer.add(row)
    return directory


def foreign_batch(tmp: Path) -> Path:
    """Captured elsewhere with the bundled tokenizer, at a path this machine lacks."""
    tokenizer = load_tokenizer(bundled_tokenizer_path())
    elsewhere = "/models/kimi-k2.5-tiny"
    config = BatchConfig("/data/p.jsonl", "00", elsewhere, tokenizer.fingerprint(),
                         tokenizer.template_hash(), SamplingIdentity(64, (SamplingPreset(),)))
    return write_batch(tmp / "foreign", tokenizer, footer(tokenizer, elsewhere), config)


def moved_batch(tmp: Path) -> Path:
    """Captured with ``old/tok``; the directory moved to ``new/tok`` and the batch was
    resumed from there (the real resume path records the new place)."""
    old, new = tmp / "old" / "tok", tmp / "new" / "tok"
    shutil.copytree(bundled_tokenizer_path(), old)
    prompts = tmp / "prompts.jsonl"
    prompts.write_text(json.dumps({"id": "q", "messages": [{"role": "user", "content": "hi"}]})
                       + "\n")
    out = tmp / "moved"

    def config(tokenizer: Path, resume: bool) -> CaptureConfig:
        return CaptureConfig(prompts=prompts, out_dir=out, servers=(ServerURL.parse("http://127.0.0.1:9"),),
                             tokenizer=tokenizer, max_new_tokens=64, resume=resume)

    tokenizer = load_tokenizer(old)
    prepared = prepare_batch(config(old, resume=False), tokenizer)
    with ShardWriter(out, metadata=footer(tokenizer, str(old)),
                     manifest=prepared.manifest) as writer:
        for row in rows_for(tokenizer):
            writer.add(row)
    new.parent.mkdir()
    old.rename(new)
    prepare_batch(config(new, resume=True), load_tokenizer(new))
    assert Manifest.load(out).config.tokenizer_path == str(new.resolve())
    return out


def partial_batch(tmp: Path) -> Path:
    """The footer's boundary record lacks ``think``; the manifest has none at all."""
    tokenizer = load_tokenizer(bundled_tokenizer_path())
    recorded = {k: v for k, v in tokenizer.boundary_ids().as_dict().items() if k != "think"}
    path = str(tokenizer.path)
    config = BatchConfig("/data/p.jsonl", "00", path, tokenizer.fingerprint(),
                         tokenizer.template_hash(), SamplingIdentity(64, (SamplingPreset(),)))
    return write_batch(tmp / "partial", tokenizer, footer(tokenizer, path, recorded), config)


BATCHES: dict[str, Callable[[Path], Path]] = {
    "foreign": foreign_batch, "moved": moved_batch, "partial": partial_batch,
}


def cli_shows(directory: Path, index: int) -> Shown:
    """What ``eagle-tui inspect DIR --index N`` prints, as (kind, text) and (marker, id)."""
    done = subprocess.run(
        [sys.executable, "-m", "eagle_tui.tui.cli", "inspect", str(directory),
         "--index", str(index)],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "NO_COLOR": "1", "COLUMNS": "400"})
    assert done.returncode == 0, done.stderr
    body = LEGEND.split(done.stdout, maxsplit=1)[1].removeprefix("\n").removesuffix("\n")
    shown: Shown = []
    kind = ""
    for part in TOKEN.split(body):
        if part.startswith("«"):
            kind = part[1:-1]
        elif part.startswith("⟦"):
            shown.append(("marker", int(part[1:-1].rsplit(" ", 1)[1])))
        elif part:
            shown.append((kind, part))
    return shown


def decoded_or_given_up(sample: SampleScreen) -> bool:
    """The view has finished with the tokenizer (decoded, or shows raw ids and why)."""
    return str(sample.decoder.content) != "decoding…"


async def view_shows(directory: Path, indices: tuple[int, ...]) -> list[Shown]:
    """What the Inspect view's sample screen shows for each row, once decoding is done."""
    app = EagleApp(
        DashboardOptions(start_view="inspect", shard_dirs=(directory,)),
        sources=Sources(capture=FakeCapture(), tokenizers=TokenizerCache(),
                        shard_dirs=(str(directory),)),
    )
    shown: list[Shown] = []
    async with app.run_test(size=(160, 50)) as pilot:
        screen = app.screen
        assert isinstance(screen, InspectScreen)
        await wait_for(pilot, lambda: screen.page is not None, what="first page")
        for index in indices:
            screen.query_one("#inspect-table", DataTable).move_cursor(row=index)
            await pilot.press("enter")
            await wait_for(pilot, lambda: isinstance(app.screen, SampleScreen), what="sample")
            sample = app.screen
            assert isinstance(sample, SampleScreen)
            await wait_for(pilot, functools.partial(decoded_or_given_up, sample), 60.0,
                           "decoding")
            document = sample.tokens.document
            assert document.decoded, str(sample.decoder.content)
            shown.append([("marker", p.ids[0]) if p.marker else (p.kind, p.text)
                          for p in document.pieces])
            await pilot.press("escape")
            await wait_for(pilot, lambda: app.screen is screen, what="back to the table")
    return shown


@pytest.mark.parametrize("case", sorted(BATCHES))
async def test_cli_and_view_decode_the_same_rows_alike(case: str, tmp_path: Path) -> None:
    directory = BATCHES[case](tmp_path)
    from_view = await view_shows(directory, ROWS)
    for index, viewed in zip(ROWS, from_view, strict=True):
        printed = cli_shows(directory, index)
        assert printed == viewed, f"row {index}"
        kinds = {kind for kind, _ in printed}
        assert {"prompt", "marker"} <= kinds and {"reasoning"} <= kinds, printed


def test_the_batches_are_what_they_claim(tmp_path: Path) -> None:
    """The cases above hold what their names say (guards the test's own set-up)."""
    foreign = foreign_batch(tmp_path)
    assert not Path(Manifest.load(foreign).config.tokenizer_path).exists()
    partial = partial_batch(tmp_path)
    manifest = msgspec.to_builtins(Manifest.load(partial).config.extra)
    assert "think" not in json.dumps(manifest.get("boundary_ids", {}))
