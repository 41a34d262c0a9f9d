"""The scheduler's runtime log lines, in SGLang 0.5.23's wording.

SGLang prints one ``Prefill batch`` line per prefill and a ``Decode batch`` line
every ``decode_log_interval`` (40) decode steps, from scheduler rank 0.
"""

from __future__ import annotations

from typing import Final

DECODE_LOG_INTERVAL: Final = 40


def prefill_line(*, new_seq: int, new_tokens: int, cached_tokens: int, token_usage: float,
                 running: int, queued: int, input_throughput: float) -> str:
    """``Prefill batch, #new-seq: …, input throughput (token/s): …``."""
    return (
        f"Prefill batch, #new-seq: {new_seq}, #new-token: {new_tokens}, "
        f"#cached-token: {cached_tokens}, token usage: {token_usage:.2f}, "
        f"#running-req: {running}, #queue-req: {queued}, #pending-token: 0, "
        f"cpu graph: False, input throughput (token/s): {input_throughput:.2f}"
    )


def decode_line(*, running: int, tokens: int, token_usage: float, throughput: float,
                queued: int) -> str:
    """``Decode batch, #running-req: …, gen throughput (token/s): …, #queue-req: …``."""
    return (
        f"Decode batch, #running-req: {running}, #token: {tokens}, "
        f"token usage: {token_usage:.2f}, cpu graph: False, "
        f"gen throughput (token/s): {throughput:.2f}, #queue-req: {queued}"
    )
