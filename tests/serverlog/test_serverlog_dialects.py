"""The parser on the log dialects of real SGLang versions and the wrappers around them.

Lines marked "corpus NN" are copied from tests/fixtures/serverlogs (real public logs);
"0.5.23 source" lines are SGLang 0.5.23's format strings filled in; lines marked "derived"
wrap a real line in a prefix no corpus log has (docker compose, kubectl), to test the
shape-based prefix stripping.
"""

from __future__ import annotations

import pytest

from eagle_tui.core.serverlog import events as ev
from eagle_tui.core.serverlog.parser import parse_line, parse_text, split_prefix, which_rule
from eagle_tui.core.serverlog.prefix import Stamp

TS_TP = "[2025-02-21 21:53:15 TP0]"

# (line, rule, event type, fields) for the rules added for real logs; every one is real.
NEW_EXAMPLES: list[tuple[str, str, type, dict[str, object]]] = [
    (  # corpus 17
        '  File "/sgl-workspace/sglang/python/sglang/launch_server.py", line 32, in <module>',
        "FRAME",
        ev.OtherLine,
        {},
    ),
    (  # corpus 19: source code in a frame is never evidence
        '    raise RuntimeError(f"NCCL error: {error_str}")',
        "FRAME",
        ev.OtherLine,
        {},
    ),
    (  # corpus 18
        "torch.distributed.DistStoreError: wait timeout after 1800000ms, keys: "
        "/default_pg/0//38//cpu//0/0",
        "DIST_TIMEOUT",
        ev.Fatal,
        {"kind": "dist_timeout"},
    ),
    ("RuntimeError: HIP error: invalid device function", "CUDA_ERROR", ev.Fatal, {}),  # 21
    (  # corpus 32
        "CUDA Error: no kernel image is available for execution on the device (209) /tmp/build/"
        "flashinfer/attention/handler.cuh: line 169",
        "CUDA_ERROR",
        ev.Fatal,
        {"kind": "cuda_error"},
    ),
    ("[2025-03-10 16:26:41 TP0] Pyspy dump for PID 2696393:", "PYSPY_DUMP", ev.Fatal, {}),  # 38
    ("Fatal Python error: Bus error", "FATAL_SIGNAL", ev.Fatal, {"kind": "fatal_signal"}),  # 23
    (  # corpus 24
        "terminate called after throwing an instance of 'std::runtime_error'",
        "FATAL_SIGNAL",
        ev.Fatal,
        {},
    ),
    ("==== backtrace (tid:   4945) ====", "NATIVE_TRACE", ev.Fatal, {}),  # corpus 33
    ("Killed", "KILLED", ev.Fatal, {"kind": "killed", "exit_code": -9}),  # corpus 31
    ("已杀死", "KILLED", ev.Fatal, {"kind": "killed"}),  # corpus 34
    (  # corpus 23
        "[2025-05-07 15:20:46] Rank 0 scheduler is dead. Please check if there are relevant logs.",
        "RANK_DEAD",
        ev.Fatal,
        {"kind": "rank_died"},
    ),
    ("[2025-05-07 15:47:12] Exit code: -7", "RANK_EXIT_CODE", ev.Fatal, {"exit_code": -7}),
    (  # corpus 23
        "[2025-05-07 15:20:46] Child process unexpectedly failed with an exit code 135. "
        "pid=430190",
        "CHILD_EXIT",
        ev.Fatal,
        {"kind": "child_exited", "exit_code": 135},
    ),
    (  # corpus 35
        "Exception in thread Thread-1 (_wait_and_warmup):",
        "WARMUP_THREAD",
        ev.Fatal,
        {"kind": "init_failed"},
    ),
    (f"{TS_TP} Init torch distributed begin.", "DIST_BEGIN", ev.DistributedInit, {}),
    ("[14:39:07 TP3] Init nccl begin.", "DIST_BEGIN", ev.DistributedInit, {"step": "begin"}),
    ("[2026-11-30 14:00:05] Init parallel begin.", "DIST_BEGIN", ev.DistributedInit, {}),
    (  # corpus 08
        "[2025-03-06 06:14:58 TP0] Init torch distributed ends. mem usage=0.13 GB",
        "DIST_END",
        ev.DistributedInit,
        {"step": "end"},
    ),
    (f"{TS_TP} sglang is using nccl==2.21.5", "DIST_NCCL", ev.DistributedInit, {"step": "nccl"}),
    (  # corpus 09
        "[Gloo] Rank 0 is connected to 7 peer ranks. Expected number of connected peer ranks "
        "is : 7",
        "DIST_NCCL",
        ev.DistributedInit,
        {},
    ),
    (  # corpus 12
        "unites4:188:188 [0] NCCL INFO Bootstrap : Using ibp194s0f0:10.2.133.35<0>",
        "DIST_COMM",
        ev.DistributedInit,
        {"step": "comm", "device": 0},
    ),
    ("NCCL version 2.21.5+cuda12.4", "DIST_COMM", ev.DistributedInit, {"device": None}),
    (  # corpus 10
        "[2025-02-11 18:41:41 TP12] Custom allreduce is disabled because this process group "
        "spans across nodes.",
        "DIST_ALLREDUCE",
        ev.DistributedInit,
        {"step": "allreduce"},
    ),
    (  # corpus 14
        "[2025-05-01 10:08:12 TP5] Using model weights format ['*.safetensors']",
        "WEIGHT_FILES",
        ev.WeightFiles,
        {},
    ),
    (  # corpus 35 (vLLM-format line in SGLang 0.3)
        "INFO 09-11 14:39:46 custom_all_reduce.py:223] Registering 3703 cuda graph addresses",
        "GRAPH_NOTE",
        ev.GraphCaptureProgress,
        {"percent": None},
    ),
    ("AssertionError", "EXCEPTION", ev.ExceptionLine, {"name": "AssertionError"}),  # corpus 22
    (  # corpus 26
        "triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: "
        "131072, Hardware limit: 65536.",
        "EXCEPTION",
        ev.ExceptionLine,
        {"name": "triton.runtime.errors.OutOfResources"},
    ),
    (  # corpus 16
        "  0%|          | 0/23 [00:00<?, ?it/s]",
        "BARE_BAR",
        ev.GraphCaptureProgress,
        {"percent": 0, "done": 0, "total": 23, "labelled": False},
    ),
    (  # corpus 22
        "WARNING 08-14 20:27:09 custom_all_reduce.py:127] Custom allreduce is disabled because "
        "your platform lacks GPU P2P capability or P2P test failed.",
        "WARN_ALLREDUCE",
        ev.WarningLine,
        {"kind": "custom_allreduce_off"},
    ),
    (  # corpus 16
        "2025-02-21 21:52:55,606 - INFO - flashinfer.jit: Prebuilt kernels not found, using JIT "
        "backend",
        "WARN_JIT",
        ev.WarningLine,
        {},
    ),
    (  # corpus 20
        "[2025-04-20 14:03:01] Automatically reduce --mem-fraction-static to 0.630 because this "
        "is a multimodal model.",
        "WARN_MEM_FRACTION",
        ev.WarningLine,
        {},
    ),
    (  # corpus 28
        "[2026-02-26 05:24:09 TP4] Using FP8 KV cache but no scaling factors provided. "
        "Defaulting to scaling factors of 1.0.",
        "WARN_KV_SCALES",
        ev.WarningLine,
        {},
    ),
    (  # corpus 08
        "[2025-03-06 06:15:37 TP3] The following error message 'operation scheduled before its "
        "operands' can be ignored.",
        "WARN_IGNORABLE",
        ev.WarningLine,
        {},
    ),
    (  # corpus 06
        "E0529 23:23:04.135766 67574 rdma_context.cpp:203] Failed to register memory "
        "0x7b468a000000: Bad address [14]",
        "WARN_RDMA",
        ev.WarningLine,
        {},
    ),
    (  # corpus 31
        "/usr/lib/python3.10/multiprocessing/resource_tracker.py:104: UserWarning: "
        "resource_tracker: process died unexpectedly, relaunching.",
        "WARN_RESOURCE_TRACKER",
        ev.WarningLine,
        {},
    ),
    (  # corpus 07
        "E0529 23:23:23.432950 69588 rdma_transport.cpp:323] Memory region not registered by "
        "any active device(s): 0x7c1cda002800",
        "KV_TRANSFER_FAIL",
        ev.ErrorLine,
        {"kind": "kv_transfer_failed"},
    ),
    (  # corpus 33
        "A100-GPU-50:338:1092 [0] NCCL INFO [Service thread] Connection closed by localRank 7",
        "NCCL_CLOSED",
        ev.ErrorLine,
        {},
    ),
]


@pytest.mark.parametrize(("text", "rule", "kind", "fields"), NEW_EXAMPLES)
def test_each_new_rule_reads_its_real_example(
    text: str, rule: str, kind: type, fields: dict[str, object]
) -> None:
    assert which_rule(text) == rule
    event = parse_line(text)
    assert isinstance(event, kind)
    for name, value in fields.items():
        assert getattr(event, name) == value, name


@pytest.mark.parametrize(
    ("text", "figures"),
    [
        (  # 0.5.x, with mem usage
            f"{TS_TP} Load weight end. elapsed=605.50 s, type=KimiK25ForConditionalGeneration, "
            "dtype=torch.bfloat16, avail mem=210.38 GB, mem usage=73.58 GB.",
            (605.5, "KimiK25ForConditionalGeneration", 210.38, 73.58),
        ),
        (  # 0.3/0.4: no mem usage (corpus 27)
            "[23:17:01 TP7] Load weight end. type=DeepseekV2ForCausalLM, dtype=torch.bfloat16, "
            "avail mem=22.01 GB",
            (None, "DeepseekV2ForCausalLM", 22.01, None),
        ),
        (  # 0.5.23: no dtype (the real CPU log)
            "[2026-11-30 14:00:07] Load weight end. elapsed=0.07 s, type=LlamaForCausalLM, avail "
            "mem=19.81 GB, mem usage=0.01 GB.",
            (0.07, "LlamaForCausalLM", 19.81, 0.01),
        ),
        (  # 0.5.23 source: weights committed after capture, no type at all
            f"{TS_TP} Load weight end. Committed real weights after CUDA graph capture in 3.20 s",
            (3.2, "", None, None),
        ),
    ],
)
def test_every_load_weight_end_form(
    text: str, figures: tuple[float | None, str, float | None, float | None]
) -> None:
    event = parse_line(text)
    assert isinstance(event, ev.WeightLoadEnd)
    assert (event.elapsed_s, event.model_class, event.avail_gb, event.mem_usage_gb) == figures


@pytest.mark.parametrize(
    ("text", "stage", "device"),
    [
        (f"{TS_TP} Capture cuda graph begin. This can take up to several minutes.", "", "cuda"),
        (  # sglang#10088 (EAGLE draft, 2025-09)
            "[2025-09-05 20:49:27 TP6] Capture draft cuda graph begin. This can take up to "
            "several minutes. avail mem=15.52 GB",
            "draft",
            "cuda",
        ),
        (  # 0.5.23 source
            f"{TS_TP} Capture draft decode CUDA graph begin. backend=fa3, avail mem=15.52 GB",
            "draft decode",
            "cuda",
        ),
        (  # sglang PR #20758 (MUSA, 2026)
            "[2026-03-17 07:16:38 TP1] Capture piecewise CUDA graph begin. avail mem=10.88 GB",
            "piecewise",
            "cuda",
        ),
        ("[2026-03-11 13:53:23 TP0] Capture npu graph begin. avail mem=32.02 GB", "", "npu"),
    ],
)
def test_every_graph_capture_begin_form(text: str, stage: str, device: str) -> None:
    event = parse_line(text)
    assert isinstance(event, ev.GraphCaptureBegin)
    assert (event.stage, event.device) == (stage, device)


def test_graph_capture_ends_and_bars_in_every_form() -> None:
    npu_end = parse_line(  # a 2026 Ascend deployment guide's start-up log
        "[2026-03-11 13:53:32 TP0] Capture npu graph end. Time elapsed: 8.04 s. mem usage=0.80 "
        "GB. avail mem=10.30 GB."
    )
    assert isinstance(npu_end, ev.GraphCaptureEnd) and npu_end.elapsed_s == pytest.approx(8.04)
    draft_end = parse_line(  # sglang#10088
        "[2025-09-05 20:50:29 TP6] Capture draft cuda graph end. Time elapsed: 62.67 s. mem "
        "usage=0.21 GB. avail mem=15.31 GB."
    )
    assert isinstance(draft_end, ev.GraphCaptureEnd) and draft_end.stage == "draft"
    no_bs = parse_line(  # corpus 33: the bar has no bs=
        "Capturing batches (avail_mem=8.88 GB):  30%|███▊     | 7/23 [00:56<00:51,  3.20s/it]"
    )
    assert isinstance(no_bs, ev.GraphCaptureProgress)
    assert (no_bs.batch_size, no_bs.percent, no_bs.done, no_bs.rate_s) == (None, 30, 7, 3.2)
    tokens = parse_line(  # sglang PR #20758: piecewise graphs count tokens
        "Compiling num tokens (num_tokens=20):   0%|          | 0/5 [00:00<?, ?it/s]"
    )
    assert isinstance(tokens, ev.GraphCaptureProgress) and tokens.batch_size == 20


@pytest.mark.parametrize(
    "text",
    [
        "RuntimeError: Not enought memory. Please try to increase --mem-fraction-static.",  # 0.1
        "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.",  # 0.4
        # 0.5.23 source
        "ValueError: Loaded weights leave no GPU memory for the KV cache under "
        "--mem-fraction-static=0.8. Raise --mem-fraction-static above 0.912",
    ],
)
def test_every_kv_cache_shortage_wording_is_fatal(text: str) -> None:
    event = parse_line(text)
    assert isinstance(event, ev.Fatal) and event.kind == "oom"


@pytest.mark.parametrize(
    ("text", "message", "ranks", "stamp"),
    [
        (  # time-only, SGLang 0.3 (corpus 27)
            "[23:17:01 TP7] Memory pool end. avail mem=18.61 GB",
            "Memory pool end. avail mem=18.61 GB",
            "TP7",
            Stamp(23, 17, 1.0),
        ),
        (  # SGLang 0.2 (corpus 22)
            "[gpu=1] Load weight begin. avail mem=21.42 GB",
            "Load weight begin. avail mem=21.42 GB",
            "gpu=1",
            None,
        ),
        (  # DP attention (corpus 33)
            "[2025-04-02 15:25:19 DP0 TP5] Memory pool end. avail mem=10.43 GB",
            "Memory pool end. avail mem=10.43 GB",
            "DP0 TP5",
            Stamp(15, 25, 19.0, 2025, 4, 2),
        ),
        (  # 2026 nightly with expert parallelism (sglang#30609)
            "[2026-07-14 07:49:04 TP3 EP3] Init torch distributed begin.",
            "Init torch distributed begin.",
            "TP3 EP3",
            Stamp(7, 49, 4.0, 2026, 7, 14),
        ),
        (  # derived: docker compose around a real line
            "sglang-1  | [2025-02-21 21:53:15 TP1] Capture cuda graph begin.",
            "Capture cuda graph begin.",
            "TP1",
            Stamp(21, 53, 15.0, 2025, 2, 21),
        ),
        (  # derived: kubectl logs --timestamps around a real line
            "2025-02-21T21:53:15.123456789Z [2025-02-21 21:53:15 TP1] Capture cuda graph begin.",
            "Capture cuda graph begin.",
            "TP1",
            Stamp(21, 53, 15.123456789, 2025, 2, 21, utc=True),
        ),
        (  # Python logging (corpus 16)
            "2025-02-21 21:52:55,606 - INFO - flashinfer.jit: Prebuilt kernels not found",
            "flashinfer.jit: Prebuilt kernels not found",
            "",
            Stamp(21, 52, 55.606, 2025, 2, 21),
        ),
        (  # torch c10d with its rank (corpus 24)
            "[rank6]:[E207 01:29:36.730311765 ProcessGroupNCCL.cpp:616] [Rank 6] Watchdog caught",
            "[Rank 6] Watchdog caught",
            "rank6",
            Stamp(1, 29, 36.730311765, None, 2, 7),
        ),
        (  # a custom log format (sglang#22877)
            "[2026-04-15 17:13:37][scheduler_metrics_mixin.py:424][INFO]: Prefill batch, "
            "#running-req: 0, #queue-req: 0",
            "Prefill batch, #running-req: 0, #queue-req: 0",
            "",
            Stamp(17, 13, 37.0, 2026, 4, 15),
        ),
        (  # vLLM's format in SGLang 0.2-0.4 (corpus 12)
            "INFO 02-18 09:33:59 __init__.py:190] Automatically detected platform cuda.",
            "Automatically detected platform cuda.",
            "",
            Stamp(9, 33, 59.0, None, 2, 18),
        ),
    ],
)
def test_prefixes_are_stripped_by_shape_and_rank_tags_survive(
    text: str, message: str, ranks: str, stamp: Stamp | None
) -> None:
    line = split_prefix(text)
    assert (line.message, line.ranks) == (message, ranks)
    assert line.stamp == stamp


def test_component_tags_are_part_of_the_message() -> None:
    line = split_prefix("[aiter] Registering 0 cuda graph addresses")
    assert line.message == "[aiter] Registering 0 cuda graph addresses" and line.stamp is None


def test_a_wrapped_fatal_line_keeps_its_rank() -> None:
    event = parse_line(
        "sglang-1  | [2026-11-30 02:28:44 TP3] Scheduler hit an exception: Traceback (most "
        "recent call last):"
    )
    assert isinstance(event, ev.Fatal) and event.kind == "scheduler_exception"
    assert event.line.ranks == "TP3" and event.opens_traceback
    assert event.line.service == "sglang-1"


def test_records_glued_to_a_bar_by_any_logger_are_split() -> None:
    # corpus 37: a Python-logging record right after the capture bar's "it/s]"
    glued = (
        "  0%|          | 0/23 [00:00<?, ?it/s]2025-03-05 10:32:32,461 - INFO - flashinfer.jit: "
        "Loading JIT ops: batch_prefill"
    )
    kinds = [type(e) for e in parse_text(glued)]
    assert kinds == [ev.GraphCaptureProgress, ev.OtherLine]
    carriage = parse_text("Loading safetensors checkpoint shards:   0% Completed | 0/4 [00:00<?, "
                          "?it/s]\rLoading safetensors checkpoint shards:  25% Completed | 1/4 "
                          "[00:01<00:03,  1.02s/it]")
    assert [e.done for e in carriage if isinstance(e, ev.ShardProgress)] == [0, 1]


def test_batch_lines_of_pd_servers_are_read_in_any_field_order() -> None:
    event = parse_line(  # corpus 03
        "[2025-06-03 20:16:55 TP0] Prefill batch. #new-seq: 1, #new-token: 2025, #cached-token: "
        "0, token usage: 0.00, #running-req: 0, #unbootstrapped-req: 0, #queue-req: 0, "
        "#transferring-req: 0, time: 165.77"
    )
    assert isinstance(event, ev.BatchStats)
    assert (event.kind, event.running, event.queued, event.token_usage) == ("prefill", 0, 0, 0.0)


def test_an_outgoing_request_is_not_the_servers_access_log() -> None:
    event = parse_line(  # corpus 20: urllib3 debug output while downloading from the hub
        '[2025-04-20 14:03:13 TP0] https://huggingface.co:443 "GET /api/models/google/gemma-3-'
        '12b-it/revision/main HTTP/1.1" 200 7114'
    )
    assert isinstance(event, ev.OtherLine)
