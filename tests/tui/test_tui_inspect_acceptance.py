"""A request's acceptance, stored and inspected: a capture against a simulated server that
speculates writes each answer's counts into the batch's shards (read back here with
pyarrow), and ``eagle-tui inspect`` (a real process) and the Inspect view (the pilot,
pressing real keys) show the figures the Streams view showed live. A batch captured
without speculation, and a shard from before the column, show nothing extra."""

from __future__ import annotations

import asyncio
import io
import json
import os
import subprocess
import sys
from argparse import Namespace
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import msgspec
import pyarrow.parquet as pq
import pytest
from rich.console import Console
from textual.widgets import DataTable, Static
from tui_fakes import FakeCapture, batch, wait_for
from tui_shards import synthetic_rows

from eagle_tui.core.accept.requests import RequestAcceptance
from eagle_tui.core.batches.api import RecentSamples
from eagle_tui.core.batches.worker import recent_sample
from eagle_tui.core.capture.config import CaptureConfig, RetryPolicy
from eagle_tui.core.capture.engine import CaptureEngine
from eagle_tui.core.capture.events import CaptureEvent, DeltaEvent, RequestEvent
from eagle_tui.core.capture.rows import column_counts as counts_to_store
from eagle_tui.core.shards.manifest import Manifest
from eagle_tui.core.shards.schema import ACCEPTANCE_FIELD
from eagle_tui.core.sim.launcher import SimProcess
from eagle_tui.core.tokenizer import bundled_tokenizer_path
from eagle_tui.core.urls import ServerURL
from eagle_tui.tui.app import EagleApp
from eagle_tui.tui.cli.inspect import run as run_inspect
from eagle_tui.tui.cli.main import build_parser
from eagle_tui.tui.options import DashboardOptions
from eagle_tui.tui.render.accept import request_acceptance_text
from eagle_tui.tui.screens.inspect import InspectScreen
from eagle_tui.tui.screens.sample import SampleScreen
from eagle_tui.tui.screens.streams import StreamsScreen
from eagle_tui.tui.sources import Sources
from eagle_tui.tui.sources.batches import recent_row
from eagle_tui.tui.sources.tokenizers import TokenizerCache

FAST = ("--time-scale", "0", "--tokens-per-s", "0", "--ttft", "0")
OLD_BATCH = Path(__file__).parent.parent / "fixtures" / "written_by_b53df5b" / "batch"
PROMPTS = 4
ACCEPTANCE = RequestAcceptance(completion_tokens=12, verify_steps=4, correct_drafts=7,
                               proposed_drafts=12, histogram=(1, 0, 2, 1))


def capture(tmp: Path, url: str, name: str) -> tuple[Path, dict[str, RequestAcceptance]]:
    """Capture four prompts from ``url`` into ``tmp/name``; the finished events'
    acceptance by sample id (what the Streams view showed)."""
    prompts = tmp / "p.jsonl"
    prompts.write_text("".join(json.dumps({"id": f"q{i}", "messages": [
        {"role": "user", "content": f"question {i}"}]}) + "\n" for i in range(PROMPTS)))
    events: list[CaptureEvent] = []
    config = CaptureConfig(prompts=prompts, out_dir=tmp / name, servers=(ServerURL.parse(url),),
                           tokenizer=bundled_tokenizer_path(), max_new_tokens=64,
                           concurrency=2, health_retry_s=0.05,
                           retry=RetryPolicy(max_attempts=2, base_delay_s=0.0))
    engine = CaptureEngine(config, event_sink=events.append)
    engine.watch(PROMPTS)
    asyncio.run(engine.run())
    live = {e.sample_id: e.acceptance for e in events
            if isinstance(e, RequestEvent) and e.kind == "finished"
            and isinstance(e.acceptance, RequestAcceptance)}
    return tmp / name, live


@pytest.fixture(scope="module")
def speculated(tmp_path_factory: pytest.TempPathFactory,
               ) -> Iterator[tuple[Path, dict[str, RequestAcceptance]]]:
    """A batch captured from a sim running EAGLE3, and the acceptance its events carried."""
    with SimProcess([*FAST, "--speculative-algorithm", "EAGLE3"]) as sim:
        sim.wait_ready(60)
        yield capture(tmp_path_factory.mktemp("spec"), sim.url, "spec")


@pytest.fixture(scope="module")
def plain(sim_server: SimProcess, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A batch captured from a sim without speculation."""
    directory, live = capture(tmp_path_factory.mktemp("plain"), sim_server.url, "plain")
    assert live == {}
    return directory


def shard_table(directory: Path) -> list[dict[str, object]]:
    manifest = Manifest.load(directory)
    files = [str(directory / "shards" / s.name) for s in manifest.shards]
    table = pq.read_table(files)
    assert table.schema.field("acceptance") == ACCEPTANCE_FIELD
    rows: list[dict[str, object]] = table.to_pylist()
    return rows


@pytest.mark.slow  # a sim process
def test_the_batch_stores_each_answers_acceptance(
        speculated: tuple[Path, dict[str, RequestAcceptance]]) -> None:
    directory, live = speculated
    rows = shard_table(directory)
    assert len(rows) == len(live) == PROMPTS
    assert Manifest.load(directory).acceptance_column
    for row in rows:
        stored = row["acceptance"]
        assert isinstance(stored, dict)
        acceptance = msgspec.convert(stored, RequestAcceptance)
        assert acceptance == live[str(row["sample_id"])]  # what the Streams view showed
        assert acceptance.verify_steps > 0 and len(acceptance.per_position) == 3
        output = len(row["input_ids"]) - row["prompt_len"]  # type: ignore[arg-type, operator]
        assert acceptance.completion_tokens == output
        # Σ_j P(>= j) x verify steps is the drafts accepted (SGLang's spec_num_correct_drafts)
        total = sum(acceptance.per_position) * acceptance.verify_steps
        assert round(total) == acceptance.correct_drafts


@pytest.mark.slow  # a sim process
def test_inspect_prints_a_rows_acceptance(
        speculated: tuple[Path, dict[str, RequestAcceptance]]) -> None:
    directory, live = speculated
    done = subprocess.run(
        [sys.executable, "-m", "eagle_tui.tui.cli", "inspect", str(directory), "--id", "q1",
         "--raw-ids"], capture_output=True, text=True, timeout=120,
        env={**os.environ, "NO_COLOR": "1", "COLUMNS": "300"})
    assert done.returncode == 0, done.stderr
    line = request_acceptance_text(live["q1"])
    assert line.startswith("accept ") and "P(>=j) " in line
    assert f"\n{line}\n" in done.stdout
    assert done.stdout.index(line) < done.stdout.index("flags: ")  # in the header


def inspect_text(directory: Path) -> str:
    """``eagle-tui inspect DIR --raw-ids`` run in this process."""
    args = build_parser(["inspect"]).parse_args(["inspect", str(directory), "--raw-ids"])
    assert isinstance(args, Namespace)
    out = io.StringIO()
    assert run_inspect(args, Console(file=out, width=300, no_color=True, markup=False,
                                     highlight=False)) == 0
    return out.getvalue()


def test_a_batch_captured_without_speculation_shows_nothing_extra(plain: Path) -> None:
    rows = shard_table(plain)  # the column is there: every value null
    assert rows and all(row["acceptance"] is None for row in rows)
    assert "accept" not in inspect_text(plain)


def test_a_shard_from_before_the_column_still_inspects() -> None:
    manifest = Manifest.load(OLD_BATCH)
    assert not manifest.acceptance_column
    names = pq.read_schema(OLD_BATCH / "shards" / manifest.shards[0].name).names
    assert "acceptance" not in names
    text = inspect_text(OLD_BATCH)
    assert "sample " in text and "flags: " in text and "accept" not in text


def inspect_app(directory: Path) -> EagleApp:
    return EagleApp(
        DashboardOptions(start_view="inspect", shard_dirs=(directory,)),
        sources=Sources(capture=FakeCapture(), tokenizers=TokenizerCache(),
                        shard_dirs=(str(directory),)),
    )


async def opened_acceptance(directory: Path, row: int) -> tuple[str, str | None]:
    """Open row ``row`` in the Inspect view (down arrows, Enter): its sample id and the
    acceptance line its sample screen shows (None: no such line)."""
    app = inspect_app(directory)
    async with app.run_test(size=(160, 40)) as pilot:
        screen = app.screen
        assert isinstance(screen, InspectScreen)
        await wait_for(pilot, lambda: screen.page is not None, what="first page")
        table = screen.query_one("#inspect-table", DataTable)
        await wait_for(pilot, lambda: table.row_count > row, what="rows")
        for _ in range(row):
            await pilot.press("down")
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, SampleScreen), what="sample")
        sample = app.screen
        assert isinstance(sample, SampleScreen)
        found = sample.query("#sample-acceptance")
        shown = str(found.only_one(Static).content) if found else None
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is screen, what="back to the table")
        return sample.view.row.sample_id, shown


@pytest.mark.slow  # a sim process
async def test_the_inspect_view_shows_a_rows_acceptance(
        speculated: tuple[Path, dict[str, RequestAcceptance]]) -> None:
    directory, live = speculated
    sample_id, shown = await opened_acceptance(directory, 2)
    assert shown == request_acceptance_text(live[sample_id])


async def test_the_inspect_view_shows_nothing_extra_without_speculation(plain: Path) -> None:
    assert (await opened_acceptance(plain, 1))[1] is None


async def test_the_inspect_view_opens_a_shard_from_before_the_column() -> None:
    assert (await opened_acceptance(OLD_BATCH, 0))[1] is None


def test_the_workers_recent_rows_carry_acceptance() -> None:
    """``GET /recent`` (a batch before its first shard) keeps a row's acceptance: worker,
    wire, dashboard."""
    row = replace(synthetic_rows(1)[0], acceptance=counts_to_store(ACCEPTANCE))
    wire = msgspec.json.decode(msgspec.json.encode(RecentSamples((recent_sample(row),))),
                               type=RecentSamples)
    assert recent_row(wire.samples[0]).acceptance == row.acceptance
    plain = msgspec.json.encode(recent_sample(synthetic_rows(1)[0]))
    assert b"acceptance" not in plain  # unwritten without: as before the field existed


async def test_from_a_watched_request_in_streams_to_its_acceptance_in_inspect(
        tmp_path: Path) -> None:
    """Streams shows a finished request's acceptance; `i` opens its batch in Inspect (the
    worker's recent rows: no shard yet), where Enter shows the same line."""
    out = tmp_path / "out"
    row = replace(synthetic_rows(1)[0], sample_id="a",
                  acceptance=counts_to_store(ACCEPTANCE))
    control = FakeCapture([batch("b1", "running", tokenizer=None, out_dir=out)])
    control.recent_rows["b1"] = [recent_row(recent_sample(row))]
    app = EagleApp(DashboardOptions(start_view="streams"),
                   sources=Sources(capture=control, tokenizers=TokenizerCache()))
    app.watching = "b1"
    line = request_acceptance_text(ACCEPTANCE)
    async with app.run_test(size=(160, 40)) as pilot:
        streams = app.screen
        assert isinstance(streams, StreamsScreen)
        control.add_events("b1", [
            RequestEvent(kind="sent", sample_id="a", at=0.0, rid="r-a", watched=True),
            DeltaEvent(sample_id="a", rid=None, new_ids=tuple(row.output_ids), total=0, at=0.0),
            RequestEvent(kind="finished", sample_id="a", at=0.0, acceptance=ACCEPTANCE)])
        await wait_for(pilot, lambda: "a" in streams.boxes
                       and line in (streams.boxes["a"].border_title or ""), what="acceptance")
        await pilot.press("i")
        await wait_for(pilot, lambda: isinstance(app.screen, InspectScreen), what="Inspect")
        inspect = app.screen
        assert isinstance(inspect, InspectScreen)
        await wait_for(pilot, lambda: inspect.page is not None and inspect.page.rows != (),
                       what="the recent rows")
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, SampleScreen), what="sample")
        shown = app.screen.query_one("#sample-acceptance", Static).content
        assert str(shown) == line
