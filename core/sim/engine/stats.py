"""Running totals behind ``/metrics``, ``/server_info`` and the batch log lines."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Final

TTFT_BUCKETS: Final = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0)
ITL_BUCKETS: Final = (0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28)
E2E_BUCKETS: Final = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)


@dataclass
class Histogram:
    """A Prometheus-style cumulative histogram."""

    buckets: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    total: float = 0.0
    count: int = 0

    def __post_init__(self) -> None:
        self.counts = [0] * len(self.buckets)

    def observe(self, value: float) -> None:
        """Add one observation."""
        self.total += value
        self.count += 1
        for index, bound in enumerate(self.buckets):
            if value <= bound:
                self.counts[index] += 1


@dataclass
class Stats:
    """Counters the scheduler updates as it works."""

    prompt_tokens: int = 0
    generation_tokens: int = 0
    cached_tokens: int = 0
    requests: int = 0  # admitted
    aborted: int = 0
    # SGLang adds a request to its Prometheus counters when it finishes
    # (observe_one_finished_request), so windows over them cover finished requests only.
    finished_requests: int = 0
    finished_generation_tokens: int = 0
    spec_verify_calls: int = 0
    gen_throughput: float = 0.0  # tokens/s over the last decode-log window
    ttft: Histogram = field(default_factory=lambda: Histogram(TTFT_BUCKETS))
    inter_token: Histogram = field(default_factory=lambda: Histogram(ITL_BUCKETS))
    e2e: Histogram = field(default_factory=lambda: Histogram(E2E_BUCKETS))
    window_start: float = field(default_factory=time.monotonic)
    window_tokens: int = 0

    def close_window(self) -> float:
        """End a throughput window; returns tokens/s since the previous one."""
        now = time.monotonic()
        elapsed = now - self.window_start
        self.gen_throughput = self.window_tokens / elapsed if elapsed > 0 else 0.0
        self.window_start = now
        self.window_tokens = 0
        return self.gen_throughput

    @property
    def cache_hit_rate(self) -> float:
        """Share of prompt tokens served from the prefix cache."""
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else 0.0
