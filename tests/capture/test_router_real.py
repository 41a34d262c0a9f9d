"""End to end through SGLang's real router (PyPI ``sglang-router``, a test dependency) in front
of simulated servers: a worker killed mid-batch, every worker down for 40 s, an abort, a
worker still loading. Every prompt must be stored exactly once, rows must say which router
served them, the manifest which workers (model and version) stood behind it, and the
router's view must show the workers' true states."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.crashresume import assert_only_valid_shards
from support.router import RouterProcess, router_installed
from support.waiting import async_wait_until
from test_engine_fakes import bundled_tokenizer, rows_of, write_prompts
from test_engine_fakes import make_config as fast_config

from eagle_tui.core.capture.config import CaptureConfig, RetryPolicy
from eagle_tui.core.capture.engine import CaptureEngine
from eagle_tui.core.capture.report import summary_text
from eagle_tui.core.errors import ConfigError
from eagle_tui.core.sglang.client import SGLangClient
from eagle_tui.core.sglang.router import TRUST_LISTED, RouterProbe, RouterView
from eagle_tui.core.shards.manifest import Manifest
from eagle_tui.core.shards.reader import ShardReader
from eagle_tui.core.sim.launcher import SimProcess
from eagle_tui.core.urls import ServerURL

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not router_installed(), reason="pip install sglang-router==0.3.2"),
]

FAST = ("--time-scale", "0", "--tokens-per-s", "0", "--ttft", "0", "--enable-metrics")
def make_config(tmp_path: Path, servers: list[str], **overrides: Any) -> CaptureConfig:
    """A fast config that also asks the router's workers directly: these tests watch them."""
    return fast_config(tmp_path, servers, **{"trust_router_workers": True, **overrides})


PATIENT = RetryPolicy(max_attempts=6, base_delay_s=0.2, max_delay_s=1.0)


def ready_sims(count: int, *extra: str) -> list[SimProcess]:
    sims = [SimProcess([*FAST, *extra]).start() for _ in range(count)]
    for sim in sims:
        sim.wait_ready(60)
    return sims


async def router_view(url: str, also: tuple[str, ...] = ()) -> RouterView:
    async with SGLangClient(ServerURL.parse(url)) as client:
        probe = RouterProbe(client, access=TRUST_LISTED)
        try:
            return await probe.look(with_load=True, also_workers=also)
        finally:
            await probe.aclose()


def assert_exactly_once(out_dir: Path, count: int) -> None:
    stored = assert_only_valid_shards(out_dir)
    assert sorted(stored) == [f"p{i:05d}" for i in range(count)]
    assert set(stored.values()) == {1}


def assert_router_provenance(out_dir: Path, router: RouterProcess) -> None:
    rows = rows_of(out_dir)
    assert {r["endpoint"] for r in rows} == {router.url}
    manifest = Manifest.load(out_dir)
    [record] = manifest.extra.routers
    assert record.url == router.url
    assert {w.url for w in record.workers} <= set(router.workers) and record.workers
    assert all(w.version == "0.5.23" and w.model_path for w in record.workers)
    reader = ShardReader(out_dir)
    try:
        metadata = reader.metadata
    finally:
        reader.close()
    assert metadata is not None
    assert metadata.server.version == "0.5.23", "the workers' version, not the router's null"


async def test_router_is_detected_and_health_means_a_worker_can_serve() -> None:
    sims = ready_sims(1)
    with RouterProcess([s.url for s in sims]) as router:
        router.wait_workers(1)
        async with SGLangClient(ServerURL.parse(router.url)) as client, SGLangClient(
                ServerURL.parse(sims[0].url)) as direct:
            probe = RouterProbe(client, access=TRUST_LISTED)
            assert await probe.detect() is True
            assert await RouterProbe(direct, access=TRUST_LISTED).detect() is False
            assert (await probe.health()).status == 200
            sims[0].kill()
            sims[0].wait_exit()
            assert (await client.health()).status == 200  # the router's own word: useless
            assert (await probe.health()).status == 503
            view = await probe.look()
            assert [w.state for w in view.workers] == ["down"]
            await probe.aclose()
    for sim in sims:
        sim.close()


async def test_worker_killed_mid_batch_loses_nothing(tmp_path: Path) -> None:
    write_prompts(tmp_path / "prompts.jsonl", 300)
    stable, doomed = ready_sims(1)[0], SimProcess([*FAST, "--crash-after-requests", "60"])
    doomed.start().wait_ready(60)
    with RouterProcess([stable.url, doomed.url]) as router, stable, doomed:
        router.wait_workers(2)
        config = make_config(tmp_path, [router.url], concurrency=8, max_new_tokens=24,
                             retry=PATIENT, health_interval_s=1.0, health_retry_s=0.2)
        summary = await CaptureEngine(config, tokenizer=bundled_tokenizer()).run()
        assert doomed.returncode is not None, "the worker really died mid-batch"
    assert summary.state == "finished" and summary.progress.counts.failed == 0, (
        summary_text(summary))
    assert_exactly_once(config.out_dir, 300)
    assert_router_provenance(config.out_dir, router)


async def test_every_worker_down_40s_pauses_and_loses_nothing(tmp_path: Path) -> None:
    """With its default health checks (3 x 60 s) the router never notices a 40 s outage and
    answers every request 500; only our own look at the workers keeps rows from burning
    their attempts (the issue's run lost 63 rows this way)."""
    write_prompts(tmp_path / "prompts.jsonl", 240)
    sims = ready_sims(2, "--tokens-per-s", "400")
    ports = [s.port for s in sims]
    back: list[SimProcess] = []
    defaults = ("--policy", "round_robin", "--disable-circuit-breaker", "--log-level", "warn")
    with RouterProcess([s.url for s in sims], flags=defaults) as router:
        router.wait_workers(2)
        config = make_config(tmp_path, [router.url], concurrency=4, max_new_tokens=32,
                             retry=PATIENT, health_interval_s=1.0, health_retry_s=0.5)
        engine = CaptureEngine(config, tokenizer=bundled_tokenizer())
        run = asyncio.ensure_future(engine.run())
        try:
            await async_wait_until(lambda: engine.progress().counts.done >= 40, 60,
                                   "40 rows through")
            for sim in sims:
                sim.kill()
            down_at = time.monotonic()
            await async_wait_until(lambda: engine.progress().servers[0].state == "paused", 20,
                           "the router paused")
            view = await router_view(router.url)
            assert {w.state for w in view.workers} == {"down"} and not view.can_serve
            done_while_down = engine.progress().counts.done
            await asyncio.sleep(max(0.0, 40 - (time.monotonic() - down_at)))
            counts = engine.progress().counts
            assert counts.done == done_while_down and counts.failed == 0
            back = [SimProcess(FAST, port=p).start() for p in ports]
            summary = await asyncio.wait_for(run, 180)
        finally:
            engine.stop(abort=True)
            for sim in [*sims, *back]:
                sim.close()
    assert summary.state == "finished" and summary.progress.counts.failed == 0, (
        summary_text(summary))
    assert "connection_lost" in summary.progress.errors
    assert_exactly_once(config.out_dir, 240)


async def test_abort_through_the_router_cuts_at_once_then_resume_completes(
    tmp_path: Path,
) -> None:
    write_prompts(tmp_path / "prompts.jsonl", 24)
    sims = ready_sims(2, "--tokens-per-s", "40")
    with RouterProcess([s.url for s in sims]) as router:
        router.wait_workers(2)
        config = make_config(tmp_path, [router.url], concurrency=4, max_new_tokens=400,
                             retry=PATIENT, stop_grace_s=30.0)
        engine = CaptureEngine(config, tokenizer=bundled_tokenizer())
        run = asyncio.ensure_future(engine.run())
        await async_wait_until(lambda: engine.progress().counts.in_flight == 8, 30,
                               "8 requests in flight")
        await asyncio.sleep(0.5)
        started = time.monotonic()
        engine.stop(abort=True)
        summary = await asyncio.wait_for(run, 30)
        took = time.monotonic() - started
        assert summary.state == "stopped", summary_text(summary)
        assert took < 3.0, f"abort took {took:.1f} s (the router has no /abort_request)"
        await wait_for_workers_idle(router.url, 3.0)
        view = await router_view(router.url)
        assert [w.state for w in view.workers] == ["ready", "ready"]
        resumed = make_config(tmp_path, [router.url], concurrency=4, max_new_tokens=400,
                              retry=PATIENT, resume=True)
        final = await CaptureEngine(resumed, tokenizer=bundled_tokenizer()).run()
    for sim in sims:
        sim.close()
    assert final.state == "finished" and final.progress.counts.failed == 0, summary_text(final)
    assert_exactly_once(config.out_dir, 24)


async def test_a_worker_still_loading_joins_later(tmp_path: Path) -> None:
    write_prompts(tmp_path / "prompts.jsonl", 200)
    fast = ready_sims(1, "--tokens-per-s", "300")[0]
    loading = SimProcess([*FAST, "--time-scale", "0.4", "--tokens-per-s", "300"])
    loading.start()
    with RouterProcess([fast.url, loading.url]) as router, fast, loading:
        router.wait_workers(1)
        view = await router_view(router.url, also=(loading.url,))
        states = {w.url: w.state for w in view.workers}
        assert states == {fast.url: "ready", loading.url: "pending"}, states
        config = make_config(tmp_path, [router.url], concurrency=4, max_new_tokens=48,
                             retry=PATIENT, health_interval_s=1.0)
        summary = await CaptureEngine(config, tokenizer=bundled_tokenizer()).run()
        loading.wait_ready(60)
        router.wait_workers(2)
        view = await router_view(router.url)
        assert {w.state for w in view.workers} == {"ready"}
    assert summary.state == "finished" and summary.progress.counts.failed == 0, (
        summary_text(summary))
    assert_exactly_once(config.out_dir, 200)


async def test_sampling_keys_the_router_drops_are_refused(tmp_path: Path) -> None:
    write_prompts(tmp_path / "prompts.jsonl", 4)
    sims = ready_sims(1)
    with RouterProcess([s.url for s in sims]) as router:
        router.wait_workers(1)
        config = make_config(tmp_path, [router.url],
                             extra_sampling={"logit_bias": {"5": 1.0}})
        with pytest.raises(ConfigError, match="logit_bias"):
            await CaptureEngine(config, tokenizer=bundled_tokenizer()).run()
        assert not config.out_dir.exists(), "refused before the batch directory is made"
        forced = make_config(tmp_path, [router.url], extra_sampling={"logit_bias": {"5": 1.0}},
                             out_dir=tmp_path / "forced", force=True)
        summary = await CaptureEngine(forced, tokenizer=bundled_tokenizer()).run()
        direct = make_config(tmp_path, [sims[0].url], out_dir=tmp_path / "direct",
                             extra_sampling={"logit_bias": {"5": 1.0}})
        straight = await CaptureEngine(direct, tokenizer=bundled_tokenizer()).run()
    for sim in sims:
        sim.close()
    assert summary.progress.counts.done == 4 and any("logit_bias" in n for n in summary.notes)
    assert straight.progress.counts.done == 4, "a plain server is not checked (it refuses itself)"


async def wait_for_workers_idle(url: str, timeout: float, *, metrics: bool = True) -> None:
    """Until every worker reports no running request (the cut reached them); with
    ``metrics=False`` a worker without ``/metrics`` (no --enable-metrics) is not waited for."""
    running: list[int | None] = []

    async def idle() -> bool:
        running[:] = [w.probe.running for w in (await router_view(url)).workers]
        return all(r == 0 or (r is None and not metrics) for r in running)

    await async_wait_until(idle, timeout, lambda: f"idle workers (still running {running})",
                           every=0.1)


def test_router_sampling_keys_match_the_installed_router() -> None:
    """Re-measure which ``sampling_params`` keys the router passes on: a key it knows with a
    value of the wrong type is refused (by it or by the worker); a key it drops is not."""
    from eagle_tui.core.sglang.router import ROUTER_SAMPLING_KEYS
    from eagle_tui.core.sim.validation.contract import SAMPLING_FIELDS

    sims = ready_sims(1)
    with RouterProcess([s.url for s in sims]) as router:
        router.wait_workers(1)
        kept = set()
        for key in SAMPLING_FIELDS:
            params = {"max_new_tokens": 2, key: {"wrong": [1]}}
            if key == "max_new_tokens":
                params = {"max_new_tokens": {"wrong": [1]}}
            answer = httpx.post(router.url + "/generate", timeout=30,
                                json={"input_ids": [1, 2], "sampling_params": params})
            if answer.status_code != 200:
                kept.add(key)
    for sim in sims:
        sim.close()
    assert kept == set(ROUTER_SAMPLING_KEYS)


REAL_URL = os.environ.get("EAGLE_REAL_SGLANG_URL")
REAL_MODEL = os.environ.get("EAGLE_REAL_SGLANG_MODEL")


@pytest.mark.realsglang
@pytest.mark.skipif(not (REAL_URL and REAL_MODEL),
                    reason="set EAGLE_REAL_SGLANG_URL and EAGLE_REAL_SGLANG_MODEL "
                           "(docs/real-sglang.md)")
async def test_through_the_router_to_real_sglang(tmp_path: Path) -> None:
    """The router in front of real SGLang 0.5.23: every prompt once, the worker's version in
    the manifest, and an abort that cuts at once and leaves the worker idle."""
    from eagle_tui.core.sampling import SamplingPreset
    from eagle_tui.core.tokenizer import load_tokenizer

    assert REAL_URL is not None and REAL_MODEL is not None
    tokenizer = load_tokenizer(Path(REAL_MODEL))
    write_prompts(tmp_path / "prompts.jsonl", 16)
    greedy = (SamplingPreset(temperature=0.0),)
    with RouterProcess([REAL_URL]) as router:
        router.wait_workers(1)
        config = make_config(tmp_path, [router.url], tokenizer=Path(REAL_MODEL), presets=greedy,
                             max_new_tokens=32, retry=PATIENT)
        summary = await CaptureEngine(config, tokenizer=tokenizer).run()
        assert summary.state == "finished" and summary.progress.counts.failed == 0
        assert_exactly_once(config.out_dir, 16)
        [record] = Manifest.load(config.out_dir).extra.routers
        assert [(w.url, w.version) for w in record.workers] == [(REAL_URL.rstrip("/"), "0.5.23")]

        long = make_config(tmp_path, [router.url], tokenizer=Path(REAL_MODEL), presets=greedy,
                           out_dir=tmp_path / "long", max_new_tokens=4000, stop_grace_s=60.0,
                           extra_sampling={"ignore_eos": True})
        engine = CaptureEngine(long, tokenizer=tokenizer)
        run = asyncio.ensure_future(engine.run())
        await async_wait_until(lambda: engine.progress().counts.in_flight == 4, 60,
                               "4 long requests")
        started = time.monotonic()
        engine.stop(abort=True)
        stopped = await asyncio.wait_for(run, 30)
        assert stopped.state == "stopped" and time.monotonic() - started < 3.0
        await wait_for_workers_idle(router.url, 10.0, metrics=False)
