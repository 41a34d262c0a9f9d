"""``/metrics``: Prometheus text with the series SGLang exports (``--enable-metrics``).

As in SGLang 0.5.23 (tests/fixtures/realsglang-spec): the ``sglang:spec_*`` gauges are
always there (0.0 without speculation; with it, the last decode-log interval's accept length
and rate and the configured steps and draft tokens); the counters move when a request
finishes; ``sglang:spec_verify_calls_total`` exists only with speculation, once a finished
request had a verify step, with only the ``engine_type`` and ``model_name`` labels.
"""

from __future__ import annotations

from eagle_tui.core.sim.context import SimContext
from eagle_tui.core.sim.engine.stats import Histogram

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def render_metrics(ctx: SimContext) -> str:
    """The exposition text for the current state."""
    model = ctx.config.served_model_name or ctx.config.model_path
    labels = (f'engine_type="unified",model_name="{model}",'
              'moe_ep_rank="0",pp_rank="0",tp_rank="0"')
    stats = ctx.stats
    scheduler = ctx.scheduler
    lines: list[str] = []
    gauges = {
        "num_running_reqs": ("The number of running requests.", scheduler.running_count),
        "num_queue_reqs": ("The number of requests in the waiting queue.", scheduler.queued_count),
        "gen_throughput": ("The generation throughput (token/s).", stats.gen_throughput),
        "token_usage": ("The token usage.", scheduler.token_usage),
        "cache_hit_rate": ("The prefix cache hit rate.", stats.cache_hit_rate),
        "kv_used_tokens": ("The number of KV tokens in use.", scheduler.kv_tokens),
        "max_total_num_tokens": ("Maximum total number of tokens in the KV cache pool.",
                                 ctx.capacity.max_total_num_tokens),
        "context_len": ("The context length.", ctx.capacity.context_len),
        **_spec_gauges(ctx),
    }
    for name, (help_text, value) in gauges.items():
        lines += [f"# HELP sglang:{name} {help_text}", f"# TYPE sglang:{name} gauge",
                  f"sglang:{name}{{{labels}}} {float(value)}"]
    counters = {
        "prompt_tokens_total": ("Number of prefill tokens processed.", stats.prompt_tokens),
        "generation_tokens_total": ("Number of generation tokens processed.",
                                    stats.finished_generation_tokens),
        "num_requests_total": ("Number of requests processed.", stats.finished_requests),
        "num_aborted_requests_total": ("Number of requests aborted.", stats.aborted),
    }
    for name, (help_text, value) in counters.items():
        lines += [f"# HELP sglang:{name} {help_text}", f"# TYPE sglang:{name} counter",
                  f"sglang:{name}{{{labels}}} {float(value)}"]
    histograms = {
        "time_to_first_token_seconds": ("Histogram of time to first token in seconds.",
                                        stats.ttft),
        "inter_token_latency_seconds": ("Histogram of inter-token latency in seconds.",
                                        stats.inter_token),
        "e2e_request_latency_seconds": ("Histogram of End-to-end request latency in seconds",
                                        stats.e2e),
    }
    for name, (help_text, histogram) in histograms.items():
        lines += _histogram(f"sglang:{name}", help_text, labels, histogram)
    if ctx.config.spec.enabled and stats.spec_verify_calls:
        short = f'engine_type="unified",model_name="{model}"'
        lines += ["# HELP sglang:spec_verify_calls_total Number of speculative decoding "
                  "verification calls.", "# TYPE sglang:spec_verify_calls_total counter",
                  f"sglang:spec_verify_calls_total{{{short}}} {float(stats.spec_verify_calls)}"]
    return "\n".join(lines) + "\n"


def _spec_gauges(ctx: SimContext) -> dict[str, tuple[str, float]]:
    spec = ctx.config.spec
    window = ctx.scheduler.spec_log
    on = spec.enabled
    return {
        "spec_accept_length": ("Mean acceptance length of speculative decoding (accepted "
                               "drafts + bonus token per forward).",
                               window.last_accept_length if on else 0.0),
        "spec_accept_rate": ("Speculative acceptance rate (`accepted drafts / proposed "
                             "drafts` in batch).", window.last_accept_rate if on else 0.0),
        "spec_num_steps": ("Currently active speculative_num_steps.",
                           spec.num_steps if on else 0.0),
        "spec_num_draft_tokens": ("Currently active speculative_num_draft_tokens (decouples "
                                  "from steps under topk>1).",
                                  spec.num_draft_tokens if on else 0.0),
    }


def _histogram(name: str, help_text: str, labels: str, histogram: Histogram) -> list[str]:
    lines = [f"# HELP {name} {help_text}", f"# TYPE {name} histogram"]
    for bound, count in zip(histogram.buckets, histogram.counts, strict=True):
        lines.append(f'{name}_bucket{{{labels},le="{bound}"}} {float(count)}')
    lines.append(f'{name}_bucket{{{labels},le="+Inf"}} {float(histogram.count)}')
    lines.append(f"{name}_count{{{labels}}} {float(histogram.count)}")
    lines.append(f"{name}_sum{{{labels}}} {histogram.total}")
    return lines
