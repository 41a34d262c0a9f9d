"""The simulated SGLang server's own command line: ``python -m eagle_tui.core.sim`` and
``eagle-tui sim`` (which imports ``add_arguments`` and ``run`` from here).

The flags mirror ``sglang.launch_server`` where SGLang has them (``--model-path``,
``--port``, ``--tp-size``, ``--api-key`` ...); the rest shape the simulation:
start-up timing, generation speed and faults.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from eagle_tui.core.sim.config import (
    DEFAULT_DECODE_LOG_INTERVAL,
    FATAL_KINDS,
    LOG_DIALECTS,
    PHASES,
    SPEC_ALGORITHMS,
    FaultRates,
    SimConfig,
    SpecSettings,
)

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

    return serve(config_from_args(args))


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` and run (the ``python -m eagle_tui.core.sim`` entry point)."""
    parser = argparse.ArgumentParser(
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


def _add_server_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=30000)
    parser.add_argument(
        "--model-path", default=None,
        help="model directory with tokenizer.json and config.json "
        "(default: the bundled Kimi-shaped tiny tokenizer)",
    )
    parser.add_argument("--served-model-name", default=None)
    parser.add_argument("--log-file", default=None, help="write the log here (default: stdout)")
    parser.add_argument(
        "--log-dialect", choices=LOG_DIALECTS, default=LOG_DIALECTS[0],
        help="print the log lines of this SGLang version (0.5: 0.5.23; 0.4: 0.4.2); "
        "behaviour is the same in every dialect",
    )
    parser.add_argument(
        "--context-length", type=_positive_int, default=None,
        help="default: max_position_embeddings from config.json, else 131072",
    )
    parser.add_argument("--tp-size", "--tp", type=_positive_int, default=8)
    parser.add_argument("--api-key", default=None)
    parser.add_argument("--enable-metrics", action="store_true")


def _add_timing_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--time-scale", type=_non_negative_float, default=1.0,
        help="multiplies every start-up duration (0: no delays; 30: about 10 minutes)",
    )
    parser.add_argument(
        "--slow-phase", type=_phase_factor, action="append", metavar="PHASE=FACTOR",
        help=f"multiply one phase's duration; phases: {', '.join(PHASES)}",
    )
    parser.add_argument(
        "--health-latency", type=_non_negative_float, default=0.05,
        help="seconds /health takes once ready (real SGLang: >= 1 s)",
    )


def _add_generation_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--tokens-per-s", type=_non_negative_float, default=60.0,
        help="decode speed per request (0: as fast as possible)",
    )
    parser.add_argument("--ttft", type=_non_negative_float, default=0.15)
    parser.add_argument(
        "--capacity", type=_positive_int, default=32,
        help="running requests beyond which every request slows down proportionally",
    )
    parser.add_argument("--max-running-requests", type=_positive_int, default=256)
    parser.add_argument("--incremental-streaming-output", action="store_true")


def _add_spec_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--speculative-algorithm", type=_algorithm, choices=SPEC_ALGORITHMS, default=None,
        help="speculative decoding as SGLang runs it: spec_* meta_info, avg_spec_accept_length, "
        "sglang:spec_* metrics, accept len in the decode log",
    )
    parser.add_argument("--speculative-num-steps", type=_positive_int, default=3)
    parser.add_argument("--speculative-eagle-topk", type=_positive_int, default=1)
    parser.add_argument("--speculative-num-draft-tokens", type=_at_least_two, default=4)
    parser.add_argument(
        "--speculative-draft-model-path", default=None,
        help="the drafter; a path naming EAGLE3 under --speculative-algorithm EAGLE accepts "
        "no draft (1.00 per step), as real SGLang does",
    )
    parser.add_argument(
        "--sim-draft-acceptance", type=_fraction, default=0.75,
        help="chance the first draft of a verify step is accepted (later positions decay; "
        "thinking prompts lower, tool calls higher, repeated text always accepted)",
    )
    parser.add_argument(
        "--decode-log-interval", type=_positive_int, default=DEFAULT_DECODE_LOG_INTERVAL,
        help="decode steps between two 'Decode batch' log lines (SGLang's flag)",
    )


def _add_fault_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--crash-at", choices=PHASES, default=None,
                        help="print that phase's typical failure and exit non-zero")
    parser.add_argument("--stall-at", choices=PHASES, default=None,
                        help="stop all output and progress halfway through that phase")
    parser.add_argument("--fatal", choices=FATAL_KINDS, default=None,
                        help="die with SGLang's fatal log lines of that kind")
    parser.add_argument("--crash-after-requests", type=_positive_int, default=None,
                        help="SIGKILL the server once N /generate calls (any status) were "
                        "answered after it became ready; in-flight connections drop")
    parser.add_argument("--error-rate", type=_fraction, default=0.0,
                        help="share of /generate answered 503/500 (SGLang's error shape)")
    parser.add_argument("--reset-rate", type=_fraction, default=0.0,
                        help="share of /generate whose connection is closed with no response")
    parser.add_argument("--garbage-rate", type=_fraction, default=0.0,
                        help="share of /generate answered 200 with a body that is not JSON")
    parser.add_argument("--fault-seed", type=int, default=None)


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {text}")
    return value


def _at_least_two(text: str) -> int:
    value = int(text)
    if value < 2:
        raise argparse.ArgumentTypeError(
            f"must be at least 2 (one draft and the bonus slot), got {text}")
    return value


def _algorithm(text: str) -> str:
    return text.upper()


def _non_negative_float(text: str) -> float:
    value = float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def _fraction(text: str) -> float:
    value = float(text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must be in [0, 1], got {text}")
    return value


def _phase_factor(text: str) -> tuple[str, float]:
    phase, sep, factor = text.partition("=")
    if not sep or phase not in PHASES:
        raise argparse.ArgumentTypeError(
            f"expected PHASE=FACTOR with PHASE one of {', '.join(PHASES)}, got {text!r}"
        )
    return phase, _non_negative_float(factor)
