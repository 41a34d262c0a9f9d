"""``/metrics``: Prometheus text with the series SGLang exports (``--enable-metrics``)."""

from __future__ import annotations

from eagle_tui.core.sim.context import SimContext
from eagle_tui.core.sim.engine.stats import Histogram

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def render_metrics(ctx: SimContext) -> str:
    """The exposition text for the current state."""
    name = ctx.config.served_model_name or ctx.config.model_path
    labels = (f'engine_type="unified",model_name="{name}",'
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
    }
    for name, (help_text, value) in gauges.items():
        lines += [f"# HELP sglang:{name} {help_text}", f"# TYPE sglang:{name} gauge",
                  f"sglang:{name}{{{labels}}} {float(value)}"]
    counters = {
        "prompt_tokens_total": ("Number of prefill tokens processed.", stats.prompt_tokens),
        "generation_tokens_total": ("Number of generation tokens processed.",
                                    stats.generation_tokens),
        "num_requests_total": ("Number of requests processed.", stats.requests),
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
    return "\n".join(lines) + "\n"


def _histogram(name: str, help_text: str, labels: str, histogram: Histogram) -> list[str]:
    lines = [f"# HELP {name} {help_text}", f"# TYPE {name} histogram"]
    for bound, count in zip(histogram.buckets, histogram.counts, strict=True):
        lines.append(f'{name}_bucket{{{labels},le="{bound}"}} {float(count)}')
    lines.append(f'{name}_bucket{{{labels},le="+Inf"}} {float(histogram.count)}')
    lines.append(f"{name}_count{{{labels}}} {float(histogram.count)}")
    lines.append(f"{name}_sum{{{labels}}} {histogram.total}")
    return lines
