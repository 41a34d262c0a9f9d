"""Decoding and checking one ``/generate`` answer: the typed msgspec decoder against the
``json.loads`` + hand checks it replaced (commit 1825cd6, copied below). Figures, no asserts.

Run: ``python tests/benchmarks/bench_generate_decode.py [--tokens 1024] [--rounds 7]``.

The body is a real SGLang 0.5.23 answer (tests/fixtures/realsrv/generate_input_ids.json,
every meta_info key kept) with ``output_ids`` grown to ``--tokens`` ids of a 160k vocab;
the stream case is one cumulative chunk of the same size. Each figure is the best of
``--rounds`` rounds of the median time of 2,000 calls, in microseconds per answer, so noise
from other processes on the machine mostly drops out. Both decoders are first checked to
give equal results.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from eagle_tui.core.errors import ProtocolError
from eagle_tui.core.sglang.stream import StreamAccumulator
from eagle_tui.core.sglang.types import FinishReason, GenerateResult
from eagle_tui.core.sglang.wire import decode_generate

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "realsrv" / "generate_input_ids.json"
URL = "http://bench/generate"

# -- the decoder of commit 1825cd6 (core/sglang/wire.py), verbatim but for names --------

_FINISH_KINDS = ("stop", "length", "abort")
_INT_ONLY = frozenset({int})


def old_parse_json(body: bytes, *, url: str) -> Any:
    try:
        return json.loads(body)
    except ValueError:
        raise ProtocolError("server sent a body that is not JSON", url=url) from None


def old_parse_finish_reason(raw: Any, *, url: str) -> FinishReason | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping) or raw.get("type") not in _FINISH_KINDS:
        raise ProtocolError(f"unknown finish_reason {raw!r}", url=url)
    return FinishReason(kind=raw["type"], matched=_int_or_str(raw.get("matched")),
                        length=_optional_int(raw.get("length")),
                        message=_optional_str(raw.get("message")),
                        status_code=_optional_int(raw.get("status_code")))


def old_parse_output_ids(item: Mapping[str, Any], *, url: str) -> tuple[int, ...]:
    ids = item.get("output_ids")
    if ids is None:
        raise ProtocolError("response has no output_ids", url=url)
    if not isinstance(ids, list) or not {*map(type, ids)} <= _INT_ONLY:
        raise ProtocolError("output_ids is not a list of integers", url=url)
    return tuple(ids)


def old_parse_result(item: Any, *, url: str, latency_s: float) -> GenerateResult:
    if not isinstance(item, Mapping) or not isinstance(item.get("meta_info"), Mapping):
        raise ProtocolError("response object has no meta_info", url=url)
    meta: Mapping[str, Any] = item["meta_info"]
    finish = old_parse_finish_reason(meta.get("finish_reason"), url=url)
    if finish is None:
        raise ProtocolError("final response has no finish_reason", url=url)
    return GenerateResult(
        rid=str(meta.get("id", "")), output_ids=old_parse_output_ids(item, url=url),
        finish=finish, text=_optional_str(item.get("text")),
        prompt_tokens=_optional_int(meta.get("prompt_tokens")),
        completion_tokens=_optional_int(meta.get("completion_tokens")),
        cached_tokens=_optional_int(meta.get("cached_tokens")), latency_s=latency_s,
        server_latency_s=_optional_float(meta.get("e2e_latency")), meta=meta)


def _optional_int(value: Any) -> int | None:
    return value if type(value) is int else None


def _optional_float(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _optional_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _int_or_str(value: Any) -> int | str | None:
    return value if type(value) is int or isinstance(value, str) else None


def old_decode(body: bytes) -> GenerateResult:
    data = old_parse_json(body, url=URL)
    if isinstance(data, list) and len(data) == 1:
        data = data[0]
    return old_parse_result(data, url=URL, latency_s=0.0)


def old_chunk(payload: str) -> tuple[int, ...]:
    """What 1825cd6's StreamAccumulator.feed checked per chunk (json + ids + finish)."""
    chunk = old_parse_json(payload.encode(), url=URL)
    meta = chunk["meta_info"]
    ids = old_parse_output_ids(chunk, url=URL)
    old_parse_finish_reason(meta.get("finish_reason"), url=URL)
    return ids


# -- the benchmark -----------------------------------------------------------------------


def new_decode(body: bytes) -> GenerateResult:
    return decode_generate(body, url=URL, latency_s=0.0)


def new_chunk(payload: str) -> tuple[int, ...]:
    return StreamAccumulator(url=URL).feed(payload).new_ids


def make_body(tokens: int) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(FIXTURE.read_text())["body"]
    rng = random.Random(0)
    body["output_ids"] = [rng.randrange(163840) for _ in range(tokens)]
    body["text"] = "x" * (4 * tokens)
    body["meta_info"]["completion_tokens"] = tokens
    body["meta_info"]["finish_reason"] = {"type": "length", "length": tokens}
    return body


def best_median_us(call: Callable[[Any], object], arg: Any, rounds: int, calls: int = 2000) -> (
    float
):
    best = float("inf")
    for _ in range(rounds):
        times = []
        for _ in range(calls):
            started = time.perf_counter_ns()
            call(arg)
            times.append(time.perf_counter_ns() - started)
        best = min(best, statistics.median(times) / 1000)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    body = make_body(args.tokens)
    raw = json.dumps(body).encode()
    chunk_body = dict(body, meta_info=dict(body["meta_info"], finish_reason=None))
    chunk = json.dumps(chunk_body)
    old, new = old_decode(raw), new_decode(raw)
    assert (old.output_ids, old.finish, old.meta, old.rid) == (
        new.output_ids, new.finish, new.meta, new.rid), "the decoders disagree"
    assert old_chunk(chunk) == new_chunk(chunk)
    print(f"/generate answer of {args.tokens} output ids ({len(raw):,} bytes), "
          f"best of {args.rounds} medians, us per answer:")
    for name, old_call, new_call, arg in [
        ("non-streaming answer", old_decode, new_decode, raw),
        ("one cumulative stream chunk", old_chunk, new_chunk, chunk),
    ]:
        before = best_median_us(old_call, arg, args.rounds)
        after = best_median_us(new_call, arg, args.rounds)
        print(f"  {name:28s} json.loads + checks {before:7.1f}   msgspec typed {after:7.1f}"
              f"   ({before / after:.1f}x)")


if __name__ == "__main__":
    main()
