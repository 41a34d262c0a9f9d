"""Units of the batch package: lock, registry and derived state, config JSON, secrets,
the event hub's bounds, socket placement."""

from __future__ import annotations

import dataclasses
import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from batch_helpers import batch_config, wait_lock_free

from eagle_tui.core.batches.configjson import config_from_json, config_to_json
from eagle_tui.core.batches.hub import EventHub, HubFull
from eagle_tui.core.batches.registry import BatchRecord, Registry
from eagle_tui.core.batches.secretenv import SERVERS_ENV, has_secrets, worker_env
from eagle_tui.core.batches.sockpath import control_socket_path, private_runtime_dir
from eagle_tui.core.batches.survey import survey
from eagle_tui.core.capture.config import RetryPolicy, SamplingPreset
from eagle_tui.core.capture.events import CaptureEvent
from eagle_tui.core.capture.outlock import OutputLock, holder_of, is_held
from eagle_tui.core.errors import BatchLocked, BatchNotFound, UntrustedSocket
from eagle_tui.core.sglang.client import API_KEY_ENV

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


def test_the_lock_dies_with_its_holder(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; from pathlib import Path; "
         "from eagle_tui.core.capture.outlock import OutputLock; "
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
        "config": {}, "created_at": time.time()}
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
    assert updated == dataclasses.replace(record, final_state="done", exit_code=0)
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
    assert "hunter2" not in json.dumps(data)
    assert data["servers"] == ["http://127.0.0.1:30000"]
    back = config_from_json(json.loads(json.dumps(data)), servers=config.servers)
    assert back == config
    keyed = dataclasses.replace(config, servers=("http://127.0.0.1:30000",), api_key="hunter2")
    data = config_to_json(keyed)
    assert "hunter2" not in json.dumps(data)
    back = config_from_json(json.loads(json.dumps(data)), api_key="hunter2")
    assert back == keyed and back.api_key == "hunter2"
    assert config_from_json(data, resume=True).resume is True


def test_secrets_travel_only_in_the_worker_environment(tmp_path: Path) -> None:
    plain = batch_config(tmp_path, "http://127.0.0.1:30000")
    assert not has_secrets(plain)
    keyed = dataclasses.replace(plain, api_key="k")
    assert has_secrets(keyed)
    assert worker_env(keyed, base={})[API_KEY_ENV] == "k"
    secret = dataclasses.replace(plain, servers=("http://u:pw@127.0.0.1:1",))
    assert has_secrets(secret)
    env = worker_env(secret, base={})
    assert json.loads(env[SERVERS_ENV]) == ["http://u:pw@127.0.0.1:1"]
    assert SERVERS_ENV not in worker_env(plain, base={SERVERS_ENV: "stale"})


# -- event hub ---------------------------------------------------------------------------------


def _event(i: int) -> CaptureEvent:
    return CaptureEvent("finished", f"s{i}", float(i), rid=f"r{i}")


async def test_a_full_queue_drops_the_oldest_and_says_how_many() -> None:
    hub = EventHub(max_queued=3)
    subscriber = hub.subscribe()
    for i in range(10):
        hub.publish(_event(i))
    frames = await subscriber.take(1.0)
    assert frames[0] == ("lost", {"dropped": 7})
    assert [data["sample_id"] for kind, data in frames[1:]] == ["s7", "s8", "s9"]
    assert subscriber.stats()["dropped"] == 7


async def test_progress_is_coalesced_to_the_newest_snapshot() -> None:
    hub = EventHub()
    subscriber = hub.subscribe()
    for i in range(1000):
        hub.publish_progress({"n": i})
    assert await subscriber.take(1.0) == [("progress", {"n": 999})]
    assert await subscriber.take(0.01) == []  # nothing pending: a keep-alive is due


async def test_end_follows_what_is_queued_also_for_late_clients() -> None:
    hub = EventHub(max_subscribers=2)
    early = hub.subscribe()
    hub.publish(_event(1))
    hub.finish({"state": "done"})
    assert [kind for kind, _ in await early.take(1.0)] == ["request", "end"] and early.ended
    late = hub.subscribe()
    assert await late.take(1.0) == [("end", {"state": "done"})]
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

