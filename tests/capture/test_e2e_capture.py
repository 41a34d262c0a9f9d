"""End to end: the ``capture`` CLI as its own process against two simulated SGLang servers
(separate processes, real sockets): exact ids, exactly once, rejects with their lines, the
API key nowhere on disk, and SIGKILL at random moments followed by resumes."""

from __future__ import annotations

import json
import random
import re
import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from support.crashresume import assert_only_valid_shards, kill_at_random_moments
from support.waiting import exited, log_contains, wait_until
from test_e2e_support import (
    check_prompt_ids,
    good_records,
    run_cli,
    start_cli,
    write_mixed_prompts,
)
from test_engine_fakes import bundled_tokenizer, rows_of, write_prompts

from eagle_tui.core.sglang import GenerateRequest, SamplingParams, SGLangClient
from eagle_tui.core.shards.manifest import Manifest
from eagle_tui.core.sim.launcher import SimProcess
from eagle_tui.core.tokenizer import bundled_tokenizer_path
from eagle_tui.core.urls import ServerURL

pytestmark = pytest.mark.slow

SECRET = "sk-e2e-do-not-leak-0123456789"
FAST = ("--time-scale", "0", "--tokens-per-s", "0", "--ttft", "0")


@pytest.fixture(scope="module")
def sims() -> Iterator[tuple[SimProcess, SimProcess]]:
    with SimProcess([*FAST, "--api-key", SECRET]) as a, \
            SimProcess([*FAST, "--api-key", SECRET]) as b:
        a.wait_ready(60)
        b.wait_ready(60)
        yield a, b


def cli_args(prompts: Path, out: Path, sims: tuple[SimProcess, SimProcess],
             *extra: str) -> list[str]:
    return ["--prompts", str(prompts), "--out", str(out), "--server", sims[0].url,
            "--server", sims[1].url, "--tokenizer", str(bundled_tokenizer_path()),
            "--max-new-tokens", "48", "--concurrency", "32", "--shard-rows", "100", *extra]


async def test_two_thousand_prompts_two_servers(tmp_path: Path,
                                                sims: tuple[SimProcess, SimProcess]) -> None:
    prompts = tmp_path / "prompts.jsonl"
    bad_lines = write_mixed_prompts(prompts, 2000)
    out = tmp_path / "out"
    done = run_cli(*cli_args(prompts, out, sims), env={"EAGLE_TUI_API_KEY": SECRET})
    assert done.returncode == 1, done.stderr[-3000:]  # 1: some prompts were rejected
    assert "capture finished" in done.stderr and f"prompts rejected      {len(bad_lines)}" \
        in done.stderr

    records = good_records(prompts)
    counts = assert_only_valid_shards(out)
    assert set(counts) == set(records) and set(counts.values()) == {1}
    rejects = [json.loads(x) for x in (out / "rejects.jsonl").read_text().splitlines()]
    assert {r["line"] for r in rejects} == bad_lines
    assert all(r["source"] == str(prompts) and r["reason"] for r in rejects)

    rows = rows_of(out)
    check_prompt_ids(rows, records, bundled_tokenizer())
    assert {r["endpoint"] for r in rows} == {sims[0].url, sims[1].url}
    await check_outputs_are_the_servers(rows, sims)

    manifest = Manifest.load(out)
    assert manifest.counts.done == len(records) and manifest.counts.rejected == len(bad_lines)
    for path in out.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path


async def check_outputs_are_the_servers(rows: list[dict[str, object]],
                                        sims: tuple[SimProcess, SimProcess]) -> None:
    """The sim's output is a pure function of prompt and sampling: asking again for a
    sample of rows must give exactly the stored output ids."""
    sampling = SamplingParams(max_new_tokens=48, temperature=1.0,
                              stop_token_ids=(163586, 163585))
    chosen = random.Random(3).sample(rows, 60)
    async with SGLangClient(ServerURL.parse(sims[0].url), api_key=SECRET) as client:
        for row in chosen:
            ids = row["input_ids"]
            prompt_len = row["prompt_len"]
            assert isinstance(ids, list) and isinstance(prompt_len, int)
            again = await client.generate(GenerateRequest(ids[:prompt_len], sampling))
            assert list(again.output_ids) == ids[prompt_len:], row["sample_id"]
            assert again.finish.kind == row["finish_reason"]


def test_sigkill_at_random_moments_then_resume(tmp_path: Path,
                                               sims: tuple[SimProcess, SimProcess]) -> None:
    prompts = tmp_path / "prompts.jsonl"
    write_mixed_prompts(prompts, 1200, seed=11)
    out = tmp_path / "out"
    args = cli_args(prompts, out, sims, "--shard-rows", "40")
    env = {"EAGLE_TUI_API_KEY": SECRET}
    kill_at_random_moments(
        lambda resume, log: start_cli(*args, *(["--resume"] if resume else []), env=env, log=log),
        out, tmp_path, random.Random(2024), rows_below=1000)
    final = run_cli(*args, "--resume", env=env)
    assert final.returncode == 1, final.stderr[-3000:]
    counts = assert_only_valid_shards(out)
    records = good_records(prompts)
    assert set(counts) == set(records) and set(counts.values()) == {1}
    assert sorted(p.name for p in (out / "shards").iterdir()) == sorted(
        s.name for s in Manifest.load(out).shards)
    check_prompt_ids(rows_of(out), records, bundled_tokenizer())


def test_sigint_drains_then_a_second_one_aborts_and_exits_130(tmp_path: Path) -> None:
    prompts = write_prompts(tmp_path / "prompts.jsonl", 400)  # all good: exit 0 expected
    out = tmp_path / "out"
    # 48 tokens: ~1.2 s each; /metrics counts the aborts
    with SimProcess([*FAST, "--tokens-per-s", "40", "--enable-metrics"]) as sim:
        sim.wait_ready(60)
        args = ["--prompts", str(prompts), "--out", str(out), "--server", sim.url,
                "--tokenizer", str(bundled_tokenizer_path()), "--max-new-tokens", "48",
                "--concurrency", "16", "--grace", "60"]
        first = start_cli(*args, log=tmp_path / "first.log")
        wait_until(sending(sim, 20), 120, "the capture sending", every=0.05,
                   unless=exited(first, "the capture"))
        first.send_signal(signal.SIGINT)
        assert first.wait(timeout=60) == 130  # interrupted with rows left: not a success
        text = (tmp_path / "first.log").read_text()
        assert "capture stopped" in text and "continue with --resume" in text
        counts = assert_only_valid_shards(out)
        assert set(counts.values()) == {1} and 20 <= len(counts) < 390
        assert sim_state(sim)["running"] == 0  # the in-flight ones finished: nothing aborted

        second = start_cli(*args, "--resume", log=tmp_path / "second.log")
        served = sim_state(sim)["requests_served"] + 20
        wait_until(sending(sim, served), 120, "the resumed capture sending", every=0.05,
                   unless=exited(second, "the capture"))
        second.send_signal(signal.SIGINT)
        # The kernel merges a signal into one still pending: wait until the first is seen.
        wait_until(log_contains(tmp_path / "second.log", "SIGINT: stopping"), 30,
                   "the first SIGINT seen", every=0.02, unless=exited(second, "the capture"))
        second.send_signal(signal.SIGINT)
        assert second.wait(timeout=30) == 130
        text = (tmp_path / "second.log").read_text()
        assert "aborting in-flight requests now" in text
        # by their rids, which the sim (as SGLang 0.5.23) honours; the run's prefix it drops,
        # and the requests then ran to their end or were cut 10 s later. The server counts
        # them; the capture does not count the user's own aborts as attempt errors.
        assert aborted_on(sim) >= 1
        assert re.search(r"attempt errors\s+none", text), text[-2000:]
        assert "did not answer the abort" not in text
        after = assert_only_valid_shards(out)
        assert set(after.values()) == {1} and set(counts) < set(after)


def aborted_on(sim: SimProcess) -> int:
    """The requests the server aborted, from its own counter (SGLang's /metrics name)."""
    metrics = httpx.get(f"{sim.url}/metrics", timeout=10).text
    found = re.search(r"^sglang:num_aborted_requests_total\{[^}]*\} (\S+)$", metrics, re.M)
    assert found, "no num_aborted_requests_total in /metrics"
    return int(float(found.group(1)))


def sim_state(sim: SimProcess) -> dict[str, int]:
    state: dict[str, int] = httpx.get(f"{sim.url}/sim/state", timeout=10).json()
    return state


def sending(sim: SimProcess, served: int) -> Callable[[], bool]:
    """A condition: the sim has answered ``served`` requests and has more running."""
    def check() -> bool:
        state = sim_state(sim)
        return state["requests_served"] >= served and state["running"] > 0

    return check
