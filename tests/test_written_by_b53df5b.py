"""Files and documents written by commit b53df5b, before every JSON shape became one msgspec
struct (issue 18), read by today's code; what other programs read is written the same again.

The files are in ``tests/fixtures/written_by_b53df5b`` (its README says how they were made).
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import msgspec
import pyarrow.parquet as pq
import pytest

from eagle_tui.core.batches.api import End, Hello, ProgressEvent, StatusDoc
from eagle_tui.core.batches.registry import Registry
from eagle_tui.core.batches.survey import BatchView
from eagle_tui.core.batchstate import BatchState
from eagle_tui.core.capture.config import config_from_json, config_to_json
from eagle_tui.core.capture.conversation import MultiTurn
from eagle_tui.core.capture.events import DeltaEvent, RequestEvent
from eagle_tui.core.capture.failures import FailureLog, read_failures
from eagle_tui.core.capture.partition import Partition
from eagle_tui.core.capture.progress import Progress
from eagle_tui.core.errors import ShardError
from eagle_tui.core.health.changes import Change
from eagle_tui.core.health.history import StartupHistory
from eagle_tui.core.health.snapshot import HealthSnapshot, Outcome, Verdict
from eagle_tui.core.sampling import SamplingPreset
from eagle_tui.core.shards.batchdir.layout import BatchDir
from eagle_tui.core.shards.manifest import Manifest
from eagle_tui.core.shards.reader import ShardReader
from eagle_tui.core.shards.schema import FooterServer, FooterTokenizer, ShardMetadata
from eagle_tui.core.shards.writer import ShardWriter
from eagle_tui.core.wire import ENCODER, decoder
from eagle_tui.tui.cli.batches import BatchDoc
from eagle_tui.tui.cli.main import main
from eagle_tui.tui.cli.status import ServerEntry, batch_line
from eagle_tui.tui.cli.watch_output import Output

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "written_by_b53df5b"
PLAIN, FULL = "20260102-030400-b53d", "20260102-030401-b53d"
COUNTS = Progress(total=400, already_done=100, done=57, written=50, failed=3, flagged=4,
                  rejected=2, retrying=1, in_flight=3, output_tokens=12345, settled=167,
                  remaining=233, elapsed_s=12.346, samples_per_s=4.617, tokens_per_s=999.9,
                  eta_s=51.2)


# -- registry records and stored configs ----------------------------------------------------


def test_records_and_their_configs_read(tmp_path: Path) -> None:
    plain, full = Registry(FIXTURES / "registry").all()
    assert (plain.id, full.id) == (PLAIN, FULL)
    assert plain.last_progress is None and full.last_progress == COUNTS
    assert (full.final_state, full.needs_secrets, full.runs) == (BatchState.STOPPED, True, 2)
    config = full.config.with_secrets(api_key="k")
    assert config.partition == Partition(2, 5)
    assert config.turns == MultiTurn("model", "dataset")
    assert config.presets == (SamplingPreset("a", temperature=0.6, seed=3),
                              SamplingPreset("b", top_k=5))
    assert (config.extra_sampling, config.boundary_overrides) == (
        {"repetition_penalty": 1.05, "stop": ["</s>"]}, {"think": 163606})
    assert ([url.public for url in config.servers], config.api_key) == (
        ["http://gpu-1:30000", "https://gpu-2:30443/v1"], "k")
    assert config.retry_failed is msgspec.UNSET  # never stored
    assert str(plain.config.prompts) == "/data/prompts.jsonl" and plain.config.partition is (
        msgspec.UNSET)
    copy = Registry(tmp_path / "reg")  # written again by this code: the same values
    for record in (plain, full):
        copy.save(record)
        name = f"{record.id}.json"
        assert json.loads((copy.root / name).read_text()) == json.loads(
            (FIXTURES / "registry" / name).read_text())


@pytest.mark.parametrize("name", ["plain", "full"])
def test_stored_configs_read_and_write_back_byte_for_byte(name: str) -> None:
    data = (FIXTURES / f"config-{name}.json").read_bytes()
    assert config_to_json(config_from_json(data)) == data


# -- the control API ------------------------------------------------------------------------

DOCUMENTS = {"hello": Hello, "progress": ProgressEvent, "request-sent": RequestEvent,
             "request-finished": RequestEvent, "request-failed": RequestEvent,
             "request-rejected": RequestEvent, "delta": DeltaEvent, "end": End,
             "status": StatusDoc}


@pytest.mark.parametrize(("name", "shape"), DOCUMENTS.items())
def test_control_documents_decode_and_encode_the_same_bytes(name: str, shape: type) -> None:
    data = (FIXTURES / "control" / f"{name}.json").read_bytes().rstrip(b"\n")
    assert ENCODER.encode(decoder(shape).decode(data)) == data


def test_the_engine_s_own_events_are_the_documents() -> None:
    sent = RequestEvent(kind="sent", sample_id="q1#a", at=1767322010.5, rid="cap-0001",
                        endpoint="http://gpu-1:30000", attempt=2, watched=True)
    delta = DeltaEvent(sample_id="q1#a", rid="cap-0001", new_ids=(163606, 12, 13), total=3,
                       at=1767322010.75)
    for event, name in ((sent, "request-sent"), (delta, "delta")):
        assert ENCODER.encode(event) + b"\n" == (FIXTURES / "control" / f"{name}.json"
                                                 ).read_bytes()


# -- failures, history, shards --------------------------------------------------------------


def test_failures_read_and_write_back_the_same_values(tmp_path: Path) -> None:
    old = BatchDir(FIXTURES / "batch").failures
    failures = list(read_failures(old))
    assert [f.sample_id for f in failures] == ["q2#b", "q9"]
    assert failures[0].reason == "prompt of 9000 tokens > 8192 — «trop long»"
    assert failures[1].reason == "lone \udc80 surrogate" and failures[1].endpoint is None
    log = FailureLog(tmp_path)
    for failure in failures:
        log.write(failure)
    log.close()
    new = BatchDir(tmp_path).failures
    assert list(read_failures(new)) == failures
    assert [json.loads(line) for line in new.read_text().splitlines()] == [
        json.loads(line) for line in old.read_text().splitlines()]


def test_history_reads_and_writes_back_the_same_values(tmp_path: Path) -> None:
    old = StartupHistory(FIXTURES / "startup-history.jsonl").records("kimi@8xH200")
    assert [(r.total_s, r.outcome) for r in old] == [(412.123, "ready"), (90.0, "crashed")]
    assert old[0].max_gaps == {"loading_weights": 42.424}
    assert old[0].step_gaps == {"weights_shards": 40.1}
    new = StartupHistory(tmp_path / "h.jsonl")
    for record in old:
        new.append(record)
    assert new.records("kimi@8xH200") == old
    assert [json.loads(line) for line in (tmp_path / "h.jsonl").read_text().splitlines()] == [
        json.loads(line) for line in
        (FIXTURES / "startup-history.jsonl").read_text().splitlines()]


@pytest.mark.parametrize(("folder", "version"), [("batch", 1), ("batch-multiturn", 2)])
def test_shards_and_footers_read_and_footers_write_the_same(
    folder: str, version: int, tmp_path: Path
) -> None:
    reader = ShardReader(FIXTURES / folder)
    assert reader.num_rows == 3 and reader.row(2).flags == ["length"]
    meta = reader.metadata
    assert meta is not None
    assert meta.schema_version == version and meta.template_hash == "ef" * 32
    assert meta.tokenizer == FooterTokenizer(name="kimi-k2.5-tiny", path="/models/kimi",
                                             fingerprint="cd" * 32, vocab_size=163840)
    assert meta.server == FooterServer(model_path="/m/kimi", version="0.5.3")
    assert ("turns" in meta.extra) == (version == 2)
    assert reader.manifest is not None
    again = tmp_path / folder
    with ShardWriter(again, metadata=meta, manifest=Manifest(again, reader.manifest.config)
                     ) as writer:
        for index in range(reader.num_rows):
            writer.add(reader.row(index))
    old, new = (_footer(d / "shards" / "part-00000.parquet") for d in (FIXTURES / folder, again))
    assert new == old


def _footer(path: Path) -> dict[str, object]:
    raw = pq.read_metadata(path).metadata
    return {k.decode(): json.loads(v) for k, v in raw.items() if k.startswith(b"eagle_tui.")}


def test_a_footer_item_that_does_not_fit_names_it() -> None:
    raw = ShardMetadata(tokenizer=FooterTokenizer(name="t")).to_parquet()
    raw[b"eagle_tui.tokenizer"] = b'{"name": "t", "vocab_size": "many"}'
    with pytest.raises(ShardError, match=r"eagle_tui\.tokenizer\.vocab_size: Expected `int"):
        ShardMetadata.from_parquet(raw)


# -- --json outputs -------------------------------------------------------------------------


def views() -> list[BatchView]:
    plain, full = Registry(FIXTURES / "registry").all()
    status = decoder(StatusDoc).decode((FIXTURES / "control" / "status.json").read_bytes())
    return [BatchView(full, BatchState.RUNNING, status.progress, live_status=status),
            BatchView(full, BatchState.STOPPED, status.progress, detail="stopped by request"),
            BatchView(plain, BatchState.INTERRUPTED, None, detail="no worker")]


def test_batches_json_is_the_same_byte_for_byte() -> None:
    printed = msgspec.json.format(ENCODER.encode([BatchDoc.of(v) for v in views()]), indent=1)
    assert printed.decode() + "\n" == (FIXTURES / "cli" / "batches.json").read_text()


def test_status_json_has_the_same_values() -> None:
    lines = json.loads(ENCODER.encode([batch_line(v) for v in views()]))
    assert lines == json.loads((FIXTURES / "cli" / "status-batches.json").read_text())
    new = list(json.loads(ENCODER.encode(ServerEntry.of("http://gpu-1:30000", health())))
               .items())
    old = list(json.loads((FIXTURES / "cli" / "status-server.json").read_text()).items())
    assert new[:len(old)] == old  # in order too; then the snapshot's fields added since
    assert new[len(old):] == [("evidence", None), ("stacks", None), ("wants_stacks", False),
                              ("orphans", None), ("busy", None)]


def test_watch_json_lines_are_the_same_in_the_same_order() -> None:
    stream = io.StringIO()
    out = Output(stream, as_json=True)
    out.emit(Change("phase", "phase capturing_graphs", {
        "phase": "capturing_graphs", "previous": "allocating_kv", "detail": "KV"}), health())
    out.emit(Change("flag", "flag slow", {"flag": "slow_startup", "next_step": "wait"}),
             health(), server="http://gpu-1:30000")
    out.final("ready", 0, "ready after 5m", health(), next_step="capture")
    out.final("stalled", 4, "no log for 5 min", None)
    out.verdict_of("http://gpu-2:30000", Verdict(Outcome.CRASHED, "OOM", "smaller batch"),
                   health())
    old = (FIXTURES / "cli" / "watch.jsonl").read_text().splitlines()
    new = stream.getvalue().splitlines()
    assert [list(json.loads(line).items()) for line in new] == [
        list(json.loads(line).items()) for line in old]


@pytest.mark.parametrize("folder", ["batch", "batch-multiturn"])
def test_stats_json_is_the_same_byte_for_byte(
    folder: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["stats", "--json", str(FIXTURES / folder)]) == 0
    assert capsys.readouterr().out == (FIXTURES / "cli" / f"stats-{folder}.json").read_text()


def health() -> HealthSnapshot:
    """The snapshot ``make_fixtures.py`` printed, rebuilt from its printed fields."""
    printed = json.loads((FIXTURES / "cli" / "status-server.json").read_text())
    del printed["url"]
    return msgspec.convert(printed, HealthSnapshot)
