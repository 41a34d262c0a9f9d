"""The pattern table against the reference's examples and the recorded real SGLang log."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from eagle_tui.core.serverlog import events as ev
from eagle_tui.core.serverlog.parser import parse_line, split_prefix, which_rule
from eagle_tui.core.serverlog.patterns import RULES

SAMPLES = Path(__file__).resolve().parents[1] / "fixtures" / "realsrv"  # recorded from real SGLang
REAL_LOG = SAMPLES / "server_startup.log"
OOV_LOG = SAMPLES / "error_out_of_vocab_server_log.txt"
needs_samples = pytest.mark.skipif(not REAL_LOG.exists(), reason="recorded samples not present")

TS = "[2026-11-30 02:28:44]"
TS_TP = "[2026-11-30 02:28:44 TP3]"

# (line, rule name, event type, fields to check)
EXAMPLES: list[tuple[str, str, type, dict[str, object]]] = [
    (
        f"{TS} server_args=ServerArgs(model_path='/models/Kimi-K2.5', tp_size=8, "
        "enable_nccl_nvls=False, quantization=None)",
        "ARGS",
        ev.ServerArgsSeen,
        {},
    ),
    (
        f"{TS_TP} Load weight begin. avail mem=76.52 GB",
        "WEIGHT_BEG",
        ev.WeightLoadBegin,
        {"avail_gb": 76.52},
    ),
    (
        "Multi-thread loading shards:  61% Completed | 39/64 [02:10<01:23,  3.3s/it]",
        "SHARDS",
        ev.ShardProgress,
        {"percent": 61, "done": 39, "total": 64},
    ),
    (
        "Loading safetensors checkpoint shards:   0% Completed | 0/163 [00:00<?, ?it/s]",
        "SHARDS",
        ev.ShardProgress,
        {"percent": 0, "done": 0, "total": 163},
    ),
    (
        f"{TS_TP} Load weight end. elapsed=212.41 s, type=DeepseekV3ForCausalLM, dtype=torch."
        "bfloat16, avail mem=12.10 GB, mem usage=64.42 GB.",
        "WEIGHT_END",
        ev.WeightLoadEnd,
        {"elapsed_s": 212.41, "model_class": "DeepseekV3ForCausalLM", "mem_usage_gb": 64.42},
    ),
    (
        f"{TS} Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=30.00 GB, "
        "mem usage=14.96 GB.",
        "WEIGHT_END",
        ev.WeightLoadEnd,
        {"elapsed_s": None},
    ),
    (
        f"{TS_TP} KV Cache is allocated. #tokens: 812345, K size: 4.50 GB, V size: 4.50 GB",
        "KV_ALLOC",
        ev.KvCacheAllocated,
        {"tokens": 812345, "size_gb": 9.0},
    ),
    (
        f"{TS_TP} KV Cache is allocated. dtype: torch.bfloat16, #tokens: 8192, KV size: 1.25 GB",
        "KV_ALLOC",
        ev.KvCacheAllocated,
        {"tokens": 8192, "size_gb": 1.25},
    ),
    (
        f"{TS_TP} Memory pool end. avail mem=3.10 GB",
        "POOL_END",
        ev.MemoryPoolEnd,
        {"avail_gb": 3.1},
    ),
    (
        f"{TS} Cuda graph is disabled because of using torch native attention backend",
        "GRAPH_OFF",
        ev.GraphsDisabled,
        {},
    ),
    (
        f"{TS_TP} Capture target decode CUDA graph begin. backend=full, num_tokens_per_req=1, "
        "avail mem=3.05 GB",
        "GRAPH_BEG",
        ev.GraphCaptureBegin,
        {"stage": "target decode"},
    ),
    (
        f"{TS_TP} Capture cuda graph begin. This can take up to several minutes. avail mem=3.0 GB",
        "GRAPH_BEG",
        ev.GraphCaptureBegin,
        {"stage": ""},
    ),
    (
        "Capturing batches (bs=160 avail_mem=2.51 GB):  35%|███▌      | 7/20 [00:02<00:04,  "
        "2.97it/s]",
        "GRAPH_BAR",
        ev.GraphCaptureProgress,
        {"batch_size": 160, "avail_gb": 2.51, "percent": 35, "done": 7, "total": 20},
    ),
    (
        f"{TS_TP} Capture target decode CUDA graph end. bs=[1, 2, 4, 8], elapsed=41.20 s, "
        "mem usage=0.61 GB, avail mem=2.44 GB.",
        "GRAPH_END",
        ev.GraphCaptureEnd,
        {"stage": "target decode", "elapsed_s": 41.2},
    ),
    (
        f"{TS_TP} Capture cuda graph end. Time elapsed: 5.67 s. mem usage=0.61 GB. "
        "avail mem=2.4 GB.",
        "GRAPH_END",
        ev.GraphCaptureEnd,
        {"elapsed_s": 5.67},
    ),
    (
        f"{TS_TP} max_total_num_tokens=812345, chunked_prefill_size=8192, "
        "max_prefill_tokens=16384, max_running_requests=2048, context_len=262144, "
        "available_gpu_mem=2.44 GB",
        "SCHED_INFO",
        ev.SchedulerLimits,
        {"max_total_num_tokens": 812345, "context_len": 262144},
    ),
    (
        f"{TS} INFO:     Started server process [17656]",
        "UV_START",
        ev.ServerProcessStarted,
        {"pid": 17656},
    ),
    (f"{TS} INFO:     Waiting for application startup.", "UV_WAIT", ev.Routine, {}),
    (f"{TS} INFO:     Application startup complete.", "UV_APP", ev.AppStartupComplete, {}),
    (f"{TS} Engine startup timings (s): load_weight=12.31, kv_cache_allocation=1.02, "
     "scheduler_e2e=20.4, cuda_graph={prefill=0.00, decode=5.91}", "ENGINE_TIMINGS",
     ev.Routine, {}),
    (
        f"{TS} INFO:     Uvicorn running on http://127.0.0.1:30001 (Press CTRL+C to quit)",
        "UV_BIND",
        ev.PortBound,
        {"host": "127.0.0.1", "port": 30001},
    ),
    (
        f'{TS} INFO:     127.0.0.1:56842 - "POST /generate HTTP/1.1" 200 OK',
        "ACCESS",
        ev.HttpAccess,
        {"method": "POST", "path": "/generate", "status": 200},
    ),
    (f"{TS} The server is fired up and ready to roll!", "READY", ev.ServerReady, {}),
    (
        f"{TS} Prefill batch, #new-seq: 1, #new-token: 8, #cached-token: 0, token usage: 0.25, "
        "#running-req: 3, #queue-req: 7, #pending-token: 0, cpu graph: False, input throughput "
        "(token/s): 6.28",
        "RUN_PREFILL",
        ev.BatchStats,
        {"kind": "prefill", "running": 3, "queued": 7, "throughput": 6.28, "token_usage": 0.25},
    ),
    (
        f"{TS_TP} Decode batch, #running-req: 12, #token: 15, token usage: 0.10, cuda graph: True, "
        "gen throughput (token/s): 812.93, #queue-req: 4",
        "RUN_DECODE",
        ev.BatchStats,
        {"kind": "decode", "running": 12, "queued": 4, "throughput": 812.93, "token_usage": 0.1},
    ),
    (
        f"{TS} SIGTERM received. signum=15 frame=None. Draining requests and shutting down...",
        "SHUTDOWN",
        ev.Shutdown,
        {"remaining": None},
    ),
    (
        f"{TS} Gracefully exiting... Remaining number of requests 3.",
        "DRAINING",
        ev.Shutdown,
        {"remaining": 3},
    ),
    ("Traceback (most recent call last):", "TRACEBACK", ev.TracebackStart, {}),
]

FATALS: list[tuple[str, str, str, int | None]] = [
    (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
        "CUDA_OOM",
        "oom",
        None,
    ),
    ("RuntimeError: CUDA error: out of memory", "CUDA_OOM", "oom", None),
    (
        f"{TS_TP} Not enough memory. Please try to increase --mem-fraction-static. Current value: "
        "mem_fraction_static=0.8",
        "NOT_ENOUGH_MEM",
        "oom",
        None,
    ),
    (
        f"{TS} ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', "
        "30000): address already in use",
        "ADDR_IN_USE",
        "address_in_use",
        None,
    ),
    ("OSError: [Errno 98] Address already in use", "ADDR_IN_USE", "address_in_use", None),
    (f"{TS} Port is already in use. Try another port.", "PORT_INTERNAL", "port_in_use", None),
    (
        f"{TS} nccl_port at 31234 is not available in 60 seconds",
        "PORT_INTERNAL",
        "port_in_use",
        None,
    ),
    (
        "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled "
        "cuda error",
        "NCCL",
        "nccl",
        None,
    ),
    (
        f"{TS_TP} [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1)",
        "NCCL",
        "nccl",
        None,
    ),
    (
        f"{TS_TP} Capture cuda graph failed: CUDA error: an illegal memory access",
        "GRAPH_FAIL",
        "graph_capture_failed",
        None,
    ),
    (
        f"{TS_TP} Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=False)",
        "WATCHDOG",
        "watchdog_timeout",
        None,
    ),
    (
        f"{TS} Rank 3 scheduler died during initialization (exit code: -9)",
        "RANK_DIED",
        "rank_died",
        -9,
    ),
    (
        f"{TS} Subprocess detokenizer (pid=4242) crashed with exit code 1",
        "SUBPROC_CRASH",
        "subprocess_crashed",
        1,
    ),
    (
        f"{TS_TP} Scheduler hit an exception: Traceback (most recent call last):",
        "SCHED_EXC",
        "scheduler_exception",
        None,
    ),
    (
        f"{TS} Initialization failed. warmup error: Traceback (most recent call last):",
        "INIT_FAIL",
        "init_failed",
        None,
    ),
    (
        f"{TS} Health check failed. Server couldn't get a response from detokenizer for last 20 "
        "seconds.",
        "HEALTH_FAIL",
        "health_check_failed",
        None,
    ),
    (
        f"{TS} Received sigquit from a child process. It usually means the child failed.",
        "SIGQUIT_CHILD",
        "child_failed",
        None,
    ),
    (
        f"{TS} SIGQUIT received. signum=None, frame=None. It usually means one child failed.",
        "SIGQUIT_RUN",
        "child_failed",
        None,
    ),
]


@pytest.mark.parametrize(("text", "rule", "kind", "fields"), EXAMPLES)
def test_each_pattern_parses_its_reference_example(
    text: str, rule: str, kind: type, fields: dict[str, object]
) -> None:
    assert which_rule(text) == rule
    event = parse_line(text)
    assert isinstance(event, kind)
    for name, value in fields.items():
        assert (
            getattr(event, name) == pytest.approx(value)
            if isinstance(value, float)
            else (getattr(event, name) == value)
        ), name


@pytest.mark.parametrize(("text", "rule", "kind", "exit_code"), FATALS)
def test_each_fatal_pattern_names_its_kind_and_keeps_the_line(
    text: str, rule: str, kind: str, exit_code: int | None
) -> None:
    assert which_rule(text) == rule
    event = parse_line(text)
    assert isinstance(event, ev.Fatal)
    assert (event.kind, event.exit_code) == (kind, exit_code)
    assert event.line.text == text


def test_every_rule_of_the_table_has_an_example() -> None:
    from test_serverlog_dialects import NEW_EXAMPLES

    covered = {rule for _, rule, _, _ in EXAMPLES} | {rule for _, rule, _, _ in FATALS}
    covered |= {rule for _, rule, _, _ in NEW_EXAMPLES}
    assert {r.name for r in RULES} <= covered


def test_prefix_split_reads_milliseconds_and_every_rank_tag() -> None:
    line = split_prefix(
        "[2026-01-01 10:00:00.123 DP0 PP1 TP3 EP3] Load weight begin. avail mem=1 GB"
    )
    assert line.timestamp == "2026-01-01 10:00:00.123"
    assert line.ranks == "DP0 PP1 TP3 EP3"
    assert line.message.startswith("Load weight begin")


def test_server_args_fields_from_dict_and_repr_forms() -> None:
    repr_form = parse_line(
        f"{TS} server_args=ServerArgs(model_path='/m/Kimi', tp_size=8, dp_size=2, "
        "quantization=None, speculative_algorithm='EAGLE3', attn_tp_size=4)"
    )
    assert isinstance(repr_form, ev.ServerArgsSeen)
    assert repr_form.fields["model_path"] == "/m/Kimi"
    assert repr_form.fields["tp_size"] == "8"
    assert repr_form.fields["speculative_algorithm"] == "EAGLE3"
    dict_form = parse_line(f"{TS} server_args={{'model_path': '/m/K', 'tp_size': 8, 'port': 1}}")
    assert isinstance(dict_form, ev.ServerArgsSeen)
    assert dict_form.fields == {"model_path": "/m/K", "tp_size": "8", "port": "1"}


@needs_samples
def test_recorded_real_startup_log_yields_the_startup_sequence_and_no_fatal() -> None:
    kinds = [type(parse_line(t.rstrip("\n"))) for t in REAL_LOG.read_text().splitlines()]
    startup = [k for k in kinds
               if k not in (ev.OtherLine, ev.Routine, ev.HttpAccess, ev.BatchStats)]
    assert startup == [
        ev.GraphsDisabled,
        ev.ServerArgsSeen,
        ev.DistributedInit,  # "Init parallel begin." (distributed init is read since issue 10)
        ev.DistributedInit,  # "Init parallel ends."
        ev.DistributedInit,  # "Memory baseline taken." (after the ranks' memory check)
        ev.WeightLoadBegin,
        ev.ShardProgress,
        ev.ShardProgress,
        ev.WeightLoadEnd,
        ev.KvCacheAllocated,
        ev.MemoryPoolEnd,
        ev.SchedulerLimits,
        ev.ServerProcessStarted,
        ev.AppStartupComplete,
        ev.PortBound,
        ev.ServerReady,
    ]
    assert ev.Fatal not in kinds
    args = next(parse_line(t) for t in REAL_LOG.read_text().splitlines() if "server_args=" in t)
    assert isinstance(args, ev.ServerArgsSeen)
    assert args.fields["tp_size"] == "1"
    assert args.fields["port"] == "30001"


@needs_samples
def test_recorded_crash_log_yields_scheduler_exception_then_child_failure() -> None:
    events = [parse_line(t) for t in OOV_LOG.read_text().splitlines() if t.strip()]
    fatal = [e.kind for e in events if isinstance(e, ev.Fatal)]
    assert fatal == ["scheduler_exception", "child_failed"]
    # The traceback's last line is read as its exception now (it was an OtherLine before).
    exceptions = [e.line.text for e in events if isinstance(e, ev.ExceptionLine)]
    assert "IndexError: index out of range in self" in exceptions


def test_garbage_never_raises_and_becomes_other_lines() -> None:
    rng = random.Random(4)
    fragments = [
        "[2026-11-30 02:28:44",
        " TP",
        "] ",
        "Load weight begin. avail mem=",
        "GB",
        "#tokens: ",
        "99999999999999999999999999",
        "% Completed | ",
        "/",
        "\x00",
        "\ufffd",
        "Capturing batches (bs=",
        "exit code: ",
        "-",
        "server_args={",
        "'tp_size': ",
    ]
    for _ in range(2000):
        text = "".join(rng.choice(fragments) for _ in range(rng.randint(0, 12)))
        parse_line(text)
    huge = parse_line("x" * 500_000 + " Load weight begin. avail mem=1 GB")
    assert isinstance(huge, ev.OtherLine)
    assert isinstance(parse_line("Load weight begin. avail mem=1.2.3 GB"), ev.OtherLine)


def test_a_record_glued_to_an_unfinished_bar_is_split_off() -> None:
    from eagle_tui.core.serverlog.parser import parse_lines, split_glued

    glued = (
        "Capturing batches (bs=88 avail_mem=4.29 GB):  58%|█████▊    | 21/36 [00:00<00:00, "
        f"281.18it/s]{TS_TP} Scheduler hit an exception: Traceback (most recent call last):"
    )
    assert split_glued(glued)[1].startswith(TS_TP)
    bar, fatal = parse_lines([glued])
    assert isinstance(bar, ev.GraphCaptureProgress)
    assert isinstance(fatal, ev.Fatal) and fatal.line.ranks == "TP3"
    assert split_glued(f"{TS_TP} Load weight begin. avail mem=1 GB") == [
        f"{TS_TP} Load weight begin. avail mem=1 GB"
    ]
