"""The simulated SGLang server's own command line: ``python -m eagle_tui.core.sim`` and
``eagle-tui sim`` (which imports ``add_arguments`` and ``run`` from here).

The flags mirror ``sglang.launch_server`` where SGLang has them (``--model-path``,
``--port``, ``--tp-size``, ``--api-key`` ...); the rest shape the simulation:
start-up timing, generation speed and faults.
"""

from __future__ import annotations

import argparse
import ipaddress
import re
import socket
import sys
from pathlib import Path

from eagle_tui.core.argtypes import (
    Checked,
    DirIn,
    FileOut,
    Line,
    Number,
    OneLineParser,
    Whole,
    seconds,
    shown,
)
from eagle_tui.core.sim.config import (
    DEFAULT_DECODE_LOG_INTERVAL,
    FATAL_KINDS,
    LOG_DIALECTS,
    PHASES,
    RANK_HANGS,
    SPEC_ALGORITHMS,
    FaultRates,
    SimConfig,
    SpecSettings,
)

MAX_INT32 = (1 << 31) - 1
MAX_FACTOR = 1000.0  # --time-scale, --slow-phase: 1000x is hours for any phase

BUNDLED_MODEL_DIR = (
    Path(__file__).resolve().parent.parent / "tokenizer" / "assets" / "kimi-k2.5-tiny"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add every sim flag to ``parser``."""
    _add_server_flags(parser)
    _add_timing_flags(parser)
    _add_generation_flags(parser)
    _add_spec_flags(parser)
    _add_fault_flags(parser)


def run(args: argparse.Namespace) -> int:
    """Run the server described by ``args``; returns the process exit code."""
    from eagle_tui.core.sim.serve import serve  # deferred: --help stays instant

    problem = _hang_problem(args)
    if problem is not None:
        print(f"eagle-tui sim: {problem}", file=sys.stderr)
        return 2
    return serve(config_from_args(args))


def _hang_problem(args: argparse.Namespace) -> str | None:
    if args.rank_hang != "peers":
        return None
    address = args.dist_init_addr or ""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        return "--rank-hang peers needs --dist-init-addr HOST:PORT (e.g. 127.0.0.1:5000)"
    if args.nnodes < 2:
        return "--rank-hang peers needs --nnodes 2 or more (node 0 waits for the others)"
    return None


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` and run (the ``python -m eagle_tui.core.sim`` entry point)."""
    parser = OneLineParser(
        prog="python -m eagle_tui.core.sim", description="Simulated SGLang 0.5.23 server."
    )
    add_arguments(parser)
    return run(parser.parse_args(argv))


def config_from_args(args: argparse.Namespace) -> SimConfig:
    """The frozen config for parsed ``args``."""
    model_path = args.model_path or str(BUNDLED_MODEL_DIR)
    return SimConfig(
        model_dir=Path(model_path).expanduser().resolve(),
        model_path=model_path,
        host=args.host,
        port=args.port,
        log_file=Path(args.log_file) if args.log_file else None,
        context_length=args.context_length,
        time_scale=args.time_scale,
        slow_phases=dict(args.slow_phase or []),
        tokens_per_s=args.tokens_per_s,
        ttft=args.ttft,
        capacity=args.capacity,
        max_running_requests=args.max_running_requests,
        incremental_streaming_output=args.incremental_streaming_output,
        api_key=args.api_key,
        enable_metrics=args.enable_metrics,
        tp_size=args.tp_size,
        served_model_name=args.served_model_name,
        health_latency=args.health_latency,
        crash_at=args.crash_at,
        crash_after_requests=args.crash_after_requests,
        stall_at=args.stall_at,
        fatal=args.fatal,
        faults=FaultRates(args.error_rate, args.reset_rate, args.garbage_rate),
        fault_seed=args.fault_seed,
        log_dialect=args.log_dialect,
        rank_hang=args.rank_hang,
        jit_compile_s=args.jit_compile,
        leave_orphan_s=args.leave_orphan,
        dist_init_addr=args.dist_init_addr,
        nnodes=args.nnodes,
        node_rank=args.node_rank,
        spec=SpecSettings(
            algorithm=args.speculative_algorithm,
            num_steps=args.speculative_num_steps,
            eagle_topk=args.speculative_eagle_topk,
            num_draft_tokens=args.speculative_num_draft_tokens,
            draft_model_path=args.speculative_draft_model_path,
            draft_acceptance=args.sim_draft_acceptance,
        ),
        decode_log_interval=args.decode_log_interval,
    )


def bind_host(text: str) -> str:
    """``--host``: an address of this machine, or a name of one, that a server can listen on
    (checked by binding a socket to it on a free port, then closing it), so a bad one is an
    option error before start-up instead of exit 3 after it."""
    Line("a host name or address")(text)
    if not _address_or_name(text):
        raise ValueError(f"{shown(text)} is neither an IP address nor a host name; give "
                         "an address of this machine, e.g. 127.0.0.1, 0.0.0.0 or ::1")
    try:
        found = socket.getaddrinfo(text, None, type=socket.SOCK_STREAM,
                                   flags=socket.AI_PASSIVE)
    except (OSError, UnicodeError) as e:
        reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise ValueError(f"{shown(text)} does not resolve ({reason}); give an address of "
                         "this machine, e.g. 127.0.0.1, 0.0.0.0 or ::1") from None
    problem = "no address"
    for family, kind, _, _, address in found:
        try:
            with socket.socket(family, kind) as probe:
                probe.bind((address[0], 0, *address[2:]))  # IPv6: flow and scope too
        except OSError as e:
            problem = e.strerror or str(e)
            continue
        return text
    raise ValueError(f"{shown(text)} cannot be listened on here ({problem}); give an "
                     "address of this machine, e.g. 127.0.0.1, 0.0.0.0 or ::1")


_HOST_LABEL = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?")


def _address_or_name(text: str) -> bool:
    """An IP address, or a host name whose last label is not all digits (RFC 3696: a name
    such as ``1.5`` or ``0`` would be read as an address by ``inet_aton``)."""
    try:
        ipaddress.ip_address(text)
    except ValueError:
        labels = text.removesuffix(".").split(".")
        return (len(text) <= 253 and all(_HOST_LABEL.fullmatch(label) for label in labels)
                and not labels[-1].isdigit())
    return True


def _add_server_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", type=Checked(bind_host),
                        help="address to bind (default 127.0.0.1; 0.0.0.0 for every interface)")
    parser.add_argument("--port", type=Whole(1, 65535), default=30000)
    parser.add_argument(
        "--model-path", default=None, type=Checked(_model_dir),
        help="model directory with tokenizer.json and config.json "
        "(default: the bundled Kimi-shaped tiny tokenizer)",
    )
    parser.add_argument("--served-model-name", default=None, type=Line("a model name"))
    parser.add_argument("--log-file", default=None, type=FileOut("log file"),
                        help="write the log here (default: stdout)")
    parser.add_argument(
        "--log-dialect", choices=LOG_DIALECTS, default=LOG_DIALECTS[0],
        help="print the log lines of this SGLang version (0.5: 0.5.23; 0.4: 0.4.2); "
        "behaviour is the same in every dialect",
    )
    parser.add_argument(
        "--context-length", type=Whole(1, MAX_INT32), default=None,
        help="default: max_position_embeddings from config.json, else 131072",
    )
    parser.add_argument("--tp-size", "--tp", type=Whole(1, 1024), default=8)
    parser.add_argument("--api-key", default=None, type=Line("an API key"))
    parser.add_argument("--enable-metrics", action="store_true")


def _add_timing_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--time-scale", type=Number(0, MAX_FACTOR), default=1.0,
        help="multiplies every start-up duration (0: no delays; 30: about 10 minutes)",
    )
    parser.add_argument(
        "--slow-phase", type=Checked(_phase_factor), action="append", metavar="PHASE=FACTOR",
        help=f"multiply one phase's duration; phases: {', '.join(PHASES)}",
    )
    parser.add_argument(
        "--health-latency", type=seconds(zero=True, high=3600), default=0.05,
        help="seconds /health takes once ready (real SGLang: >= 1 s)",
    )


def _add_generation_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--tokens-per-s", type=Number(0, 1e6), default=60.0,
        help="decode speed per request (0: as fast as possible)",
    )
    parser.add_argument("--ttft", type=seconds(zero=True, high=3600), default=0.15)
    parser.add_argument(
        "--capacity", type=Whole(1, 1 << 20), default=32,
        help="running requests beyond which every request slows down proportionally",
    )
    parser.add_argument("--max-running-requests", type=Whole(1, 1 << 20), default=256)
    parser.add_argument("--incremental-streaming-output", action="store_true")


def _add_spec_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--speculative-algorithm", type=_algorithm, choices=SPEC_ALGORITHMS, default=None,
        help="speculative decoding as SGLang runs it: spec_* meta_info, avg_spec_accept_length, "
        "sglang:spec_* metrics, accept len in the decode log",
    )
    parser.add_argument("--speculative-num-steps", type=Whole(1, 64), default=3)
    parser.add_argument("--speculative-eagle-topk", type=Whole(1, 64), default=1)
    parser.add_argument("--speculative-num-draft-tokens", type=Whole(2, 1024), default=4)
    parser.add_argument(
        "--speculative-draft-model-path", type=Line("a draft model path"), default=None,
        help="the drafter; a path naming EAGLE3 under --speculative-algorithm EAGLE accepts "
        "no draft (1.00 per step), as real SGLang does",
    )
    parser.add_argument(
        "--sim-draft-acceptance", type=Number(0, 1), default=0.75,
        help="chance the first draft of a verify step is accepted (later positions decay; "
        "thinking prompts lower, tool calls higher, repeated text always accepted)",
    )
    parser.add_argument(
        "--decode-log-interval", type=Whole(1, MAX_INT32), default=DEFAULT_DECODE_LOG_INTERVAL,
        help="decode steps between two 'Decode batch' log lines (SGLang's flag)",
    )


def _add_fault_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--crash-at", choices=PHASES, default=None,
                        help="print that phase's typical failure and exit non-zero")
    parser.add_argument("--stall-at", choices=PHASES, default=None,
                        help="stop all output and progress halfway through that phase")
    parser.add_argument("--fatal", choices=FATAL_KINDS, default=None,
                        help="die with SGLang's fatal log lines of that kind")
    parser.add_argument("--crash-after-requests", type=Whole(1, MAX_INT32), default=None,
                        help="SIGKILL the server once N /generate calls (any status) were "
                        "answered after it became ready; in-flight connections drop")
    parser.add_argument("--error-rate", type=Number(0, 1), default=0.0,
                        help="share of /generate answered 503/500 (SGLang's error shape)")
    parser.add_argument("--reset-rate", type=Number(0, 1), default=0.0,
                        help="share of /generate whose connection is closed with no response")
    parser.add_argument("--garbage-rate", type=Number(0, 1), default=0.0,
                        help="share of /generate answered 200 with a body that is not JSON")
    parser.add_argument("--fault-seed", type=Whole(0, (1 << 63) - 1), default=None)
    parser.add_argument("--rank-hang", choices=RANK_HANGS, default=None,
                        help="a rank process hangs for ever: fifo (opens a named pipe as its "
                        "weight shard), stop (SIGSTOPs itself after Load weight begin), peers "
                        "(node 0's store waits for nodes that never come; needs "
                        "--dist-init-addr and --nnodes 2 or more)")
    parser.add_argument("--jit-compile", type=seconds(zero=True), default=None, metavar="S",
                        help="at graph capture, a rank's compiler child (cc1plus) burns a core "
                        "for S seconds, printing nothing")
    parser.add_argument("--leave-orphan", type=seconds(zero=True), default=None, metavar="S",
                        help="start a child that outlives the sim and then holds its port for "
                        "S seconds (a leftover scheduler of an earlier run)")
    parser.add_argument("--dist-init-addr", type=Line("HOST:PORT"), default=None,
                        metavar="HOST:PORT",
                        help="the distributed-init rendezvous (as SGLang; used by "
                        "--rank-hang peers)")
    parser.add_argument("--nnodes", type=Whole(1, 4096), default=1)
    parser.add_argument("--node-rank", type=Whole(0, 4095), default=0)


def _model_dir(text: str) -> str:
    """``--model-path`` as given (it is also the served model's name), once it is checked
    to be a directory."""
    DirIn("model directory")(text)
    return text


def _algorithm(text: str) -> str:
    return text.upper()


def _phase_factor(text: str) -> tuple[str, float]:
    phase, sep, factor = text.partition("=")
    if not sep or phase not in PHASES:
        raise ValueError(
            f"expected PHASE=FACTOR with PHASE one of {', '.join(PHASES)}, got {shown(text)}"
        )
    return phase, Number(0, MAX_FACTOR)(factor)
