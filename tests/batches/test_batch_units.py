"""Units of the batch package: lock, registry and derived state, config JSON, secrets,
the event hub's bounds, socket placement."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import msgspec
import pytest
from batch_helpers import batch_config, wait_lock_free

from eagle_tui.core.batches.api import End, Lost, ProgressEvent
from eagle_tui.core.batches.hub import EventHub, HubFull
from eagle_tui.core.batches.registry import BatchRecord, Registry
from eagle_tui.core.batches.secretenv import (
    SERVERS_ENV,
    has_secrets,
    secrets_from_env,
    worker_env,
)
from eagle_tui.core.batches.sockpath import control_socket_path, private_runtime_dir
from eagle_tui.core.batches.survey import survey
from eagle_tui.core.batchstate import BatchState
from eagle_tui.core.capture.config import (
    CaptureConfig,
    RetryPolicy,
    config_from_json,
    config_to_json,
)
from eagle_tui.core.capture.events import CaptureEvent, RequestEvent
from eagle_tui.core.capture.progress import Progress, ProgressTracker
from eagle_tui.core.clock import SystemClock
from eagle_tui.core.errors import (
    BatchError,
    BatchLocked,
    BatchNotFound,
    ConfigError,
    UntrustedSocket,
)
from eagle_tui.core.sampling import SamplingPreset
from eagle_tui.core.sglang.client import API_KEY_ENV
from eagle_tui.core.shards.batchdir.lock import OutputLock, holder_of, is_held
from eagle_tui.core.urls import ServerURL

ROOT = Path(__file__).resolve().parents[2]

# -- lock ---------------------------------------------------------------------------------


def test_a_second_controller_is_refused_with_who_holds_it(tmp_path: Path) -> None:
    with OutputLock(tmp_path / "out").acquire(batch_id="b-1"):
        assert is_held(tmp_path / "out")
        holder = holder_of(tmp_path / "out")
        assert holder is not None and holder.pid == os.getpid()
        with pytest.raises(BatchLocked, match=rf"pid {os.getpid()} \(batch b-1\).*another --out"):
            OutputLock(tmp_path / "out").acquire(retry_s=0)
    assert not is_held(tmp_path / "out")
    OutputLock(tmp_path / "out").acquire(retry_s=0).release()


@pytest.mark.slow
def test_the_lock_dies_with_its_holder(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; from pathlib import Path; "
         "from eagle_tui.core.shards.batchdir.lock import OutputLock; "
         "OutputLock(Path(sys.argv[1])).acquire(); print('held', flush=True); sys.stdin.read()",
         str(tmp_path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=ROOT)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
        assert is_held(tmp_path)
        holder.kill()
        assert wait_lock_free(tmp_path, timeout=10)
        OutputLock(tmp_path).acquire(retry_s=0).release()
    finally:
        holder.kill()
        holder.wait()
        for stream in (holder.stdin, holder.stdout):
            if stream is not None:
                stream.close()


# -- registry and derived state -----------------------------------------------------------


def _record(tmp_path: Path, batch_id: str, **fields: object) -> BatchRecord:
    out_dir = tmp_path / batch_id
    values: dict[str, object] = {
        "id": batch_id, "name": f"name-{batch_id}", "out_dir": str(out_dir),
        "socket": str(out_dir / "control.sock"), "log": str(out_dir / "worker.log"),
        "config": CaptureConfig(prompts=Path("p.jsonl"), out_dir=out_dir,
                                servers=(ServerURL.parse("http://127.0.0.1:30000"),),
                                tokenizer=Path("tok")),
        "created_at": time.time()}
    values.update(fields)
    return BatchRecord(**values)  # type: ignore[arg-type]


def test_records_round_trip_privately(tmp_path: Path) -> None:
    registry = Registry(tmp_path / "reg")
    record = _record(tmp_path, "20250101-000000-abcd", pid=12)
    registry.save(record)
    assert registry.load(record.id) == record
    assert stat.S_IMODE(registry.root.stat().st_mode) == 0o700
    assert stat.S_IMODE(registry.path_of(record.id).stat().st_mode) == 0o600
    updated = registry.update(record.id, final_state="done", exit_code=0)
    assert updated == msgspec.structs.replace(record, final_state=BatchState.DONE, exit_code=0)
    (registry.root / "broken.json").write_text("{")
    assert registry.all() == [updated]  # an unreadable record is skipped, not fatal


def test_find_by_id_prefix_name_or_directory(tmp_path: Path) -> None:
    registry = Registry(tmp_path / "reg")
    a = _record(tmp_path, "20250101-000000-aaaa", name="night")
    b = _record(tmp_path, "20250101-000001-bbbb", name="day")
    for record in (a, b):
        registry.save(record)
    assert registry.find(a.id) == a
    assert registry.find("night") == a
    assert registry.find("bbbb") == b
    Path(b.out_dir).mkdir()
    assert registry.find(b.out_dir) == b
    with pytest.raises(BatchNotFound, match="several batches"):
        registry.find("20250101")
    with pytest.raises(BatchNotFound, match="eagle-tui batches"):
        registry.find("nothing-like-it")


async def test_state_is_derived_from_lock_record_and_socket(tmp_path: Path) -> None:
    long_ago = time.time() - 3600
    done = _record(tmp_path, "done", final_state="done", pid=1, launched_at=long_ago)
    died = _record(tmp_path, "died", pid=1, launched_at=long_ago)
    never = _record(tmp_path, "never", launched_at=long_ago)
    fresh = _record(tmp_path, "fresh", launched_at=time.time())
    assert (await survey(done)).state == "done"
    assert (await survey(died)).state == "interrupted"
    assert (await survey(never)).state == "interrupted"
    assert (await survey(fresh)).state == "starting"
    with OutputLock(Path(died.out_dir)).acquire():  # alive, but its socket is gone
        view = await survey(died)
    assert view.state == "unresponsive" and view.live and "not running" in (view.detail or "")


# -- config JSON and secrets ----------------------------------------------------------------


def test_config_round_trips_without_secrets(tmp_path: Path) -> None:
    # A query string, and user info together with a key, are refused now (issue 12):
    # the secrets are a password in the URL, and separately an API key.
    config = batch_config(
        tmp_path, "http://user:hunter2@127.0.0.1:30000/",
        presets=(SamplingPreset("a", temperature=0.6, seed=3), SamplingPreset("b", top_k=5)),
        retry=RetryPolicy(max_attempts=4), extra_sampling={"repetition_penalty": 1.05},
        template_kwargs={"thinking": True}, model_dir=tmp_path)
    data = config_to_json(config)
    assert b"hunter2" not in data
    assert json.loads(data)["servers"] == ["http://127.0.0.1:30000"]
    back = config_from_json(data, servers=config.servers)
    assert back == config and back.servers[0].for_requests == "http://user:hunter2@127.0.0.1:30000"
    assert config_from_json(data).servers[0].userinfo == ""  # only the worker's env has it
    keyed = msgspec.structs.replace(config, servers=(ServerURL.parse("http://127.0.0.1:30000"),),
                                    api_key="hunter2")
    data = config_to_json(keyed)
    assert b"hunter2" not in data
    back = config_from_json(data, api_key="hunter2")
    assert back == keyed and back.api_key == "hunter2"
    assert config_from_json(data, resume=True).resume is True


def test_a_detached_batch_keeps_trusting_router_workers_only_when_asked(
        tmp_path: Path) -> None:
    plain = batch_config(tmp_path, "http://127.0.0.1:30000")
    assert "trust_router_workers" not in json.loads(config_to_json(plain))
    trusting = msgspec.structs.replace(plain, trust_router_workers=True)
    assert config_from_json(config_to_json(trusting)).trust_router_workers is True
    assert config_from_json(config_to_json(plain)).trust_router_workers is msgspec.UNSET


def test_the_stored_config_has_every_config_field_but_the_secret() -> None:
    config = CaptureConfig(prompts=Path("p"), out_dir=Path("o"),
                           servers=(ServerURL.parse("http://h:1"),), tokenizer=Path("t"),
                           api_key="k", retry_failed=True)
    stored = json.loads(config_to_json(config))
    # retry_failed is each run's own choice (`--retry-failed`), never carried to the next;
    # partition, turns, trust_router_workers and held_out are written only when set
    assert set(stored) == set(CaptureConfig.__struct_fields__) - {
        "api_key", "retry_failed", "partition", "turns", "trust_router_workers", "held_out"}
    back = config_from_json(json.dumps(stored))
    assert (back.api_key, back.retry_failed) == (msgspec.UNSET, msgspec.UNSET)
    # the same defaults, too: a record holding only the required fields reads as the config
    required = {name: stored[name] for name in ("prompts", "out_dir", "servers", "tokenizer")}
    assert config_from_json(json.dumps(required)) == config.without_secrets()


def test_a_stored_config_of_the_wrong_type_is_refused_naming_the_field() -> None:
    data = json.loads(config_to_json(
        batch_config(Path("/tmp/x"), "http://127.0.0.1:30000")))
    data["concurrency"] = "4"
    with pytest.raises(ConfigError, match=r"concurrency: Expected `int`, got `str`.*new batch"):
        config_from_json(json.dumps(data))
    data["concurrency"], data["presets"] = 4, [{"name": "a", "top_k": 0}]
    with pytest.raises(ConfigError, match="top_k must be -1"):
        config_from_json(json.dumps(data))


WRITTEN_BY_1825CD6 = ROOT / "tests" / "fixtures" / "written_by_1825cd6" / "registry"


def test_records_written_by_commit_1825cd6_read(tmp_path: Path) -> None:
    registry = Registry(WRITTEN_BY_1825CD6)
    done, fresh = registry.all()
    assert (done.final_state, done.exit_code, done.runs, done.pid) == (BatchState.DONE, 0, 1, 4242)
    assert done.last_progress == Progress(
        total=12, done=12, written=12, flagged=12, output_tokens=384, settled=12, remaining=0,
        elapsed_s=0.967, samples_per_s=12.404, tokens_per_s=396.9, eta_s=0.0)
    assert fresh.last_progress is None and fresh.final_state is None  # it was saved as {}
    config = done.config.with_secrets(api_key="k")
    assert config.presets == (SamplingPreset("a", temperature=0.6, seed=3),
                              SamplingPreset("b", top_k=5))
    assert (config.extra_sampling, config.template_kwargs) == (
        {"repetition_penalty": 1.05}, {"thinking": True})
    assert (config.retry.max_attempts, config.shard_rows, config.api_key) == (4, 5, "k")
    # written again by this code: the same values
    copy = Registry(tmp_path / "reg")
    copy.save(done)
    name = f"{done.id}.json"
    assert json.loads((copy.root / name).read_text()) == json.loads(
        (WRITTEN_BY_1825CD6 / name).read_text())


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda r: r.update(final_state="zombie"), "final_state: Invalid enum value 'zombie'"),
        (lambda r: r.update(pid="4242"), "pid: Expected `int | null`, got `str`"),
        (lambda r: r["last_progress"].update(done=None), "last_progress.done: Expected `int`"),
        (lambda r: r["config"].update(servers="http://h:1"), "config.servers: Expected `array`"),
        (lambda r: r.pop("socket"), "missing required field `socket`"),
    ],
)
def test_a_corrupt_record_is_a_clear_error_naming_the_file_and_field(
    tmp_path: Path, change: object, field: str
) -> None:
    data = json.loads((WRITTEN_BY_1825CD6 / "20261130-020000-abcd.json").read_text())
    change(data)  # type: ignore[operator]
    registry = Registry(tmp_path / "reg")
    registry.root.mkdir()
    path = registry.path_of(data["id"])
    path.write_text(json.dumps(data))
    with pytest.raises(BatchError) as caught:
        registry.load(data["id"])
    message = str(caught.value)
    assert str(path) in message and field in message and "delete it" in message
    assert registry.all() == []  # listing skips it (and logs why)


def test_an_update_of_the_wrong_type_is_refused_and_not_written(tmp_path: Path) -> None:
    registry = Registry(tmp_path / "reg")
    record = _record(tmp_path, "20250101-000000-abcd")
    registry.save(record)
    with pytest.raises(BatchError, match="final_state: Invalid enum value 'finishd'"):
        registry.update(record.id, final_state="finishd")
    assert registry.load(record.id) == record


def test_secrets_travel_only_in_the_worker_environment(tmp_path: Path) -> None:
    plain = batch_config(tmp_path, "http://127.0.0.1:30000")
    assert not has_secrets(plain)
    keyed = msgspec.structs.replace(plain, api_key="k")
    assert has_secrets(keyed)
    assert worker_env(keyed, base={})[API_KEY_ENV] == "k"
    secret = msgspec.structs.replace(plain,
                                     servers=(ServerURL.parse("http://u:pw@127.0.0.1:1"),))
    assert has_secrets(secret)
    env = worker_env(secret, base={})
    assert json.loads(env[SERVERS_ENV]) == ["http://u:pw@127.0.0.1:1"]
    assert SERVERS_ENV not in worker_env(plain, base={SERVERS_ENV: "stale"})


def test_a_server_list_in_the_environment_must_be_a_json_list_of_urls(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(SERVERS_ENV, '["http://u:pw@h:1", "http://h:2"]')
    servers = secrets_from_env()[1]
    assert servers is not None
    assert [url.for_requests for url in servers] == ["http://u:pw@h:1", "http://h:2"]
    for bad in ('"http://h:1"', "[1]", "not json", '["http://h:1/?key=x"]'):
        monkeypatch.setenv(SERVERS_ENV, bad)
        with pytest.raises(ConfigError, match=f"{SERVERS_ENV} must be a JSON list"):
            secrets_from_env()


# -- event hub ---------------------------------------------------------------------------------


def _event(i: int) -> CaptureEvent:
    return RequestEvent(kind="finished", sample_id=f"s{i}", at=float(i), rid=f"r{i}")


async def test_a_full_queue_drops_the_oldest_and_says_how_many() -> None:
    hub = EventHub(max_queued=3)
    subscriber = hub.subscribe()
    for i in range(10):
        hub.publish(_event(i))
    frames = await subscriber.take(1.0)
    assert frames[0] == ("lost", Lost(dropped=7))
    assert [data.sample_id for kind, data in frames[1:]] == ["s7", "s8", "s9"]
    assert subscriber.stats().dropped == 7


async def test_progress_is_coalesced_to_the_newest_snapshot() -> None:
    hub = EventHub()
    subscriber = hub.subscribe()
    snapshot = ProgressTracker(SystemClock()).snapshot()
    for i in range(1000):
        hub.publish_progress(ProgressEvent.of(snapshot, float(i)))
    assert await subscriber.take(1.0) == [("progress", ProgressEvent.of(snapshot, 999.0))]
    assert await subscriber.take(0.01) == []  # nothing pending: a keep-alive is due


async def test_end_follows_what_is_queued_also_for_late_clients() -> None:
    hub = EventHub(max_subscribers=2)
    early = hub.subscribe()
    hub.publish(_event(1))
    hub.finish(End(state=BatchState.DONE))
    assert [kind for kind, _ in await early.take(1.0)] == ["request", "end"] and early.ended
    late = hub.subscribe()
    assert await late.take(1.0) == [("end", End(state=BatchState.DONE))]
    with pytest.raises(HubFull):
        hub.subscribe()


# -- socket placement ------------------------------------------------------------------------


def test_a_socket_path_too_long_for_sun_path_moves_to_a_private_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert control_socket_path(tmp_path, "b1") == tmp_path / "control.sock"
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "rt"))
    (tmp_path / "rt").mkdir()
    deep = tmp_path / ("d" * 120)
    path = control_socket_path(deep, "b1")
    assert path == tmp_path / "rt" / f"eagle-tui-{os.getuid()}" / "b1.sock"
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


def test_a_shared_runtime_dir_is_not_trusted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    shared = tmp_path / f"eagle-tui-{os.getuid()}"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    with pytest.raises(UntrustedSocket, match="not a private directory"):
        private_runtime_dir()

