"""``--log-dialect``: each SGLang version's log lines, read from a sim started as a process.

The expected lines are SGLang's own wording and number formats (docs/sim.md names
the real logs and sources they follow); the behaviour around them (ports, /health,
/generate) is the same in every dialect.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest
from sim_helpers import RECORDINGS

from eagle_tui.core.sim.launcher import SimProcess
from eagle_tui.core.sim.log.dialect import PrefillStats
from eagle_tui.core.sim.log.dialect_04 import Sglang04
from eagle_tui.core.sim.log.dialect_05 import Sglang05
from eagle_tui.core.sim.model.capacity import Capacity

pytestmark = pytest.mark.slow

FAST = ["--time-scale", "0", "--tokens-per-s", "0", "--ttft", "0"]
STAMP = r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d"  # an SGLang line prefix, without its close


def messages(sim: SimProcess, tag: str) -> list[str]:
    """Messages of the lines whose prefix carries exactly ``tag`` ("" = main process).

    Searched, not matched: a line logged while a tqdm bar is half drawn follows the bar.
    """
    prefix = re.compile(STAMP + re.escape(tag) + r"\] (.*)$")
    return [m[1] for line in sim.log_lines() if (m := prefix.search(line))]


def stream_long_answer(sim: SimProcess) -> None:
    """A streamed request steps once per token: enough decode steps for a Decode line."""
    body = {"input_ids": [1, 2, 3], "stream": True,
            "sampling_params": {"max_new_tokens": 90, "ignore_eos": True}}
    with httpx.stream("POST", sim.url + "/generate", json=body, timeout=30) as response:
        for _ in response.iter_lines():
            pass


@pytest.fixture(scope="module")
def sim04() -> Iterator[SimProcess]:
    with SimProcess([*FAST, "--log-dialect", "0.4", "--tp-size", "1"]) as sim:
        sim.wait_ready(timeout=30)
        stream_long_answer(sim)
        sim.wait_for_line(r"Decode batch\. ", timeout=10)
        yield sim


def test_04_start_up_lines_in_order_with_tp0_tags_at_tp1(sim04: SimProcess) -> None:
    rank0 = messages(sim04, " TP0")
    expected = [
        r"Init torch distributed begin\.$",
        r"Load weight begin\. avail mem=139\.12 GB$",
        r"Load weight end\. type=\w+, dtype=torch\.bfloat16, avail mem=66\.25 GB$",
        r"KV Cache is allocated\. K size: 30\.62 GB, V size: 30\.62 GB\.$",
        r"Memory pool end\. avail mem=5\.00 GB$",
        r"Capture cuda graph begin\. This can take up to several minutes\.$",
        r"Capture cuda graph end\. Time elapsed: \d+\.\d\d s$",
        r"max_total_num_tokens=1048576, chunked_prefill_size=8192, max_prefill_tokens=16384, "
        r"max_running_requests=256, context_len=262144$",
    ]
    start_up = [line for line in rank0 if "batch" not in line][:len(expected)]
    assert len(start_up) == len(expected)
    for line, pattern in zip(start_up, expected, strict=True):
        assert re.match(pattern, line), line


def test_04_main_process_lines(sim04: SimProcess) -> None:
    main = messages(sim04, "")
    assert main[0].startswith("server_args=ServerArgs(model_path='")
    assert "file_storage_pth='sglang_storage'" in main[0]  # 0.4.2's own field names
    assert "The server is fired up and ready to roll!" in main
    text = sim04.log_text()
    for absent in ("Init parallel", "mem usage=", "Engine startup timings", "#tokens:",
                   "available_gpu_mem", "Prefill batch,", "cpu graph"):
        assert absent not in text


def test_04_bars_and_batch_lines(sim04: SimProcess) -> None:
    lines = sim04.log_lines()
    assert "Loading safetensors checkpoint shards: 100% Completed | 64/64 [" in "\n".join(lines)
    assert any(re.fullmatch(r"100%\|██████████\| 36/36 \[\d\d:\d\d<00:00, .*\]", line)
               for line in lines)
    rank0 = messages(sim04, " TP0")
    assert any(re.fullmatch(
        r"Prefill batch\. #new-seq: 1, #new-token: \d+, #cached-token: \d+, cache hit rate: "
        r"\d+\.\d\d%, token usage: \d\.\d\d, #running-req: \d+, #queue-req: \d+", line)
        for line in rank0)
    assert any(re.fullmatch(
        r"Decode batch\. #running-req: 1, #token: \d+, token usage: \d\.\d\d, "
        r"gen throughput \(token/s\): \d+\.\d\d, #queue-req: 0", line) for line in rank0)


def test_04_killed_rank_makes_the_launcher_raise_eof() -> None:
    with SimProcess([*FAST, "--log-dialect", "0.4", "--fatal", "rank-died"]) as sim:
        assert sim.wait_exit(timeout=30) == 1
        main = messages(sim, "")
        assert main[-2:] == ["Rank 5 scheduler is dead. Please check if there are relevant logs.",
                             "Exit code: -9"]
        lines = sim.log_lines()
        assert "Traceback (most recent call last):" in lines
        assert [line for line in lines if line][-1] == "EOFError"
        assert "kill_process_tree" not in sim.log_text()


def test_04_graph_oom_carries_04_advice_then_sigquit() -> None:
    with SimProcess([*FAST, "--log-dialect", "0.4", "--fatal", "oom"]) as sim:
        assert sim.wait_exit(timeout=30) == -9
        text = sim.log_text()
        assert re.search(STAMP + r" TP3\] Scheduler hit an exception: Traceback", text)
        assert "Possible solutions:\n1. disable cuda graph by --disable-cuda-graph\n" in text
        assert messages(sim, "")[-1] == (
            "Received sigquit from a child process. It usually means the child failed.")


def test_04_runtime_crash_has_no_diagnostics_pause() -> None:
    args = [*FAST, "--log-dialect", "0.4", "--crash-after-requests", "1", "--tp-size", "2"]
    with SimProcess(args) as sim:
        sim.wait_ready(timeout=30)
        answered = httpx.post(sim.url + "/generate", json={"input_ids": [1, 2]}, timeout=10)
        assert answered.status_code == 200  # the crash follows the counted answer
        assert sim.wait_exit(timeout=30) == -9
        assert messages(sim, " TP0")[-1].startswith("Scheduler hit an exception: Traceback")
        assert messages(sim, "")[-1] == (
            "Received sigquit from a child process. It usually means the child failed.")
        assert "Sleeping 5 seconds" not in sim.log_text()


@pytest.mark.parametrize("dialect", ["0.5", "0.4"])
def test_behaviour_is_the_same_in_every_dialect(dialect: str) -> None:
    with SimProcess([*FAST, "--log-dialect", dialect]) as sim:
        sim.wait_ready(timeout=30)
        assert httpx.get(sim.url + "/health", timeout=5).status_code == 200
        answer = httpx.post(sim.url + "/generate", timeout=10, json={
            "input_ids": [1, 2, 3], "sampling_params": {"max_new_tokens": 5, "ignore_eos": True}})
        assert len(answer.json()["output_ids"]) == 5
        info = httpx.get(sim.url + "/server_info", timeout=5).json()
        assert info["version"] == "0.5.23"  # the HTTP side is 0.5.23's in every dialect


def test_05_is_the_default_and_tags_ranks_only_above_tp1() -> None:
    with SimProcess([*FAST, "--tp-size", "1"]) as sim:
        sim.wait_ready(timeout=30)
        main = messages(sim, "")
        assert main[0].startswith("server_args={'model_path': ")
        assert "Init parallel begin." in main
        assert messages(sim, " TP0") == []


# ---- the lines themselves, against real SGLang log lines -----------------------------

def test_04_lines_match_a_real_042_start_up() -> None:
    # numbers from a real 0.4.2 start-up (tp 1, Qwen2 7B on a 24 GB GPU)
    dialect = Sglang04()
    assert dialect.weight_end(457.0, "Qwen2ForCausalLM", 8.37, 14.39) == (
        "Load weight end. type=Qwen2ForCausalLM, dtype=torch.bfloat16, avail mem=8.37 GB")
    assert dialect.kv_allocated(105531, 2.82, 2.82) == (
        "KV Cache is allocated. K size: 2.82 GB, V size: 2.82 GB.")
    assert dialect.pool_end(1.68) == "Memory pool end. avail mem=1.68 GB"
    assert dialect.graph_end((1, 2, 4, 8), 1.79, 0.0, 0.0) == (
        "Capture cuda graph end. Time elapsed: 1.79 s")
    assert dialect.graph_bar(8, 0.0, 1, 4, 1.14) == " 25%|██▌       | 1/4 [00:01<00:03,  1.14s/it]"
    limits = Capacity(context_len=131072, max_total_num_tokens=105531, max_req_input_len=0,
                      max_running_requests=2049, capture_bs=(1, 2, 4, 8))
    assert dialect.scheduler_limits(limits, 2048, 16384, 1.68) == (
        "max_total_num_tokens=105531, chunked_prefill_size=2048, max_prefill_tokens=16384, "
        "max_running_requests=2049, context_len=131072")
    assert dialect.prefill_line(PrefillStats(1, 7, 0, 0.0, 0.0, 0, 0, 3.5)) == (
        "Prefill batch. #new-seq: 1, #new-token: 7, #cached-token: 0, cache hit rate: 0.00%, "
        "token usage: 0.00, #running-req: 0, #queue-req: 0")


def test_05_lines_match_the_recorded_0523_start_up() -> None:
    # tests/fixtures/realsrv/server_startup.log (0.5.23 on CPU)
    recorded = (RECORDINGS / "server_startup.log").read_text()
    dialect = Sglang05()
    for line in (
        dialect.weight_begin(21.23),
        dialect.weight_end(0.05, "LlamaForCausalLM", 21.23, 0.0),
        dialect.pool_end(21.19),
        "Init parallel begin.",
        dialect.init_lines(0.09)[1][0],
        dialect.init_lines(0.09)[1][1],
        dialect.prefill_line(PrefillStats(1, 8, 0, 0.0, 0.0, 0, 0, 6.28)),
    ):
        assert f"] {line}\n" in recorded, line

