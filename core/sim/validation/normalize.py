"""Layer 3 of ``/generate`` validation: SGLang's tokenizer manager.

Turns a contract-clean body into one ``GenerateItem`` per prompt: batch
detection, rid expansion (``R`` -> ``R_0, R_1, …``), sampling defaults, the
context-length checks and ``SamplingParams.verify`` ranges, and the duplicate
in-flight rid check, raising ``InputRejected`` with SGLang's messages.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Container
from dataclasses import dataclass
from typing import Any, Final

from eagle_tui.core.sim.model.modeldir import ModelDir
from eagle_tui.core.sim.request import GenerateItem, LogprobSpec, SamplingSpec
from eagle_tui.core.sim.validation.rejections import InputRejected

DEFAULT_MAX_NEW_TOKENS: Final = 128
TOP_K_ALL: Final = 1 << 30


@dataclass(frozen=True)
class GenerateCall:
    """A validated ``/generate`` call."""

    items: list[GenerateItem]
    is_batch: bool
    stream: bool
    return_prompt_token_ids: bool


def normalize(body: dict[str, Any], *, model: ModelDir, context_length: int,
              in_flight: Container[str]) -> GenerateCall:
    """Validate ``body`` as the tokenizer manager would; raises InputRejected."""
    prompts, is_batch = _prompts(body, model)
    count = len(prompts)
    rids = _rids(body.get("rid"), count, is_batch)
    sampling = _per_item(body.get("sampling_params"), count, "sampling_params", {})
    items = []
    for index, (rid, prompt, params) in enumerate(zip(rids, prompts, sampling, strict=True)):
        _check_context(prompt, params, context_length)
        items.append(GenerateItem(rid, prompt, _sampling_spec(params or {}),
                                  _logprob_spec(body, index, count)))
    _check_duplicates(rids, in_flight)
    return GenerateCall(items, is_batch, _truthy(body.get("stream")),
                        _truthy(body.get("return_prompt_token_ids")))


def _prompts(body: dict[str, Any], model: ModelDir) -> tuple[list[list[int]], bool]:
    text, input_ids = body.get("text"), body.get("input_ids")
    if (text is None) == (input_ids is None):
        raise InputRejected("Either text, input_ids or input_embeds should be provided.")
    if input_ids is not None:
        if not input_ids:
            raise InputRejected("input_ids cannot be empty.")
        is_batch = isinstance(input_ids[0], list)
        prompts = [[int(t) for t in p] for p in (input_ids if is_batch else [input_ids])]
        if any(not p for p in prompts):
            raise InputRejected("input_ids cannot be empty.")
        return prompts, is_batch
    is_batch = isinstance(text, list)
    texts: list[str] = text if isinstance(text, list) else [str(text)]
    return [list(model.tokenizer.encode(t).ids) for t in texts], is_batch


def _rids(rid: Any, count: int, is_batch: bool) -> list[str]:
    if rid is None:
        return [uuid.uuid4().hex for _ in range(count)]
    if isinstance(rid, str):
        return [f"{rid}_{i}" for i in range(count)] if is_batch else [rid]
    if len(rid) != count:
        raise InputRejected(
            "The specified rids length mismatch with the batch_size for batch processing."
        )
    return [str(r) for r in rid]


def _per_item(value: Any, count: int, name: str, default: Any) -> list[Any]:
    if value is None:
        return [default] * count
    if not isinstance(value, list):
        return [value] * count
    if count == 1 and len(value) >= 1:
        return [value[0]]
    if len(value) != count:
        raise InputRejected(f"The length of {name} ({len(value)}) does not match the batch "
                            f"size ({count}).")
    return list(value)


def _check_context(prompt: list[int], params: dict[str, Any] | None, context_length: int) -> None:
    length = len(prompt)
    if length >= context_length:
        raise InputRejected(
            f"The input ({length} tokens) is longer than the model's context length "
            f"({context_length} tokens)."
        )
    max_new = (params or {}).get("max_new_tokens")
    if max_new is not None and length + max_new >= context_length:
        raise InputRejected(
            f"Requested token count exceeds the model's maximum context length of "
            f"{context_length} tokens. You requested a total of {length + max_new} tokens: "
            f"{length} tokens from the input messages and {max_new} tokens for the "
            "completion. Please reduce the number of tokens in the input messages or the "
            "completion to fit within the limit."
        )


def _sampling_spec(params: dict[str, Any]) -> SamplingSpec:
    values = {key: value for key, value in params.items() if value is not None}
    _verify(values)
    stop = values.get("stop", ())
    return SamplingSpec(
        max_new_tokens=values.get("max_new_tokens", DEFAULT_MAX_NEW_TOKENS),
        temperature=values.get("temperature", 1.0),
        top_p=values.get("top_p", 1.0),
        top_k=values.get("top_k", -1),
        min_new_tokens=values.get("min_new_tokens", 0),
        stop_token_ids=frozenset(values.get("stop_token_ids", ())),
        stop_strings=(stop,) if isinstance(stop, str) else tuple(stop),
        ignore_eos=values.get("ignore_eos", False),
        skip_special_tokens=values.get("skip_special_tokens", True),
        no_stop_trim=values.get("no_stop_trim", False),
        sampling_seed=values.get("sampling_seed"),
    )


def _verify(values: dict[str, Any]) -> None:
    """``SamplingParams.verify``: the same checks, order and messages (raw JSON numbers)."""
    temperature = values.get("temperature", 1.0)
    if not math.isfinite(temperature) or temperature < 0:
        raise InputRejected(f"temperature must be a non-negative finite number, got {temperature}.")
    top_p = values.get("top_p", 1.0)
    if not 0.0 < top_p <= 1.0:
        raise InputRejected(f"top_p must be in (0, 1], got {top_p}.")
    min_p = values.get("min_p", 0.0)
    if not 0.0 <= min_p <= 1.0:
        raise InputRejected(f"min_p must be in [0, 1], got {min_p}.")
    top_k = values.get("top_k", TOP_K_ALL)
    if top_k < 1 and top_k != -1:
        raise InputRejected(
            f"top_k must be at least 1, got {top_k}. Note: top_k=-1 is also accepted as input, "
            f"which disables top_k filtering (equivalent to top_k={TOP_K_ALL} internally)."
        )
    for name in ("frequency_penalty", "presence_penalty"):
        value = values.get(name, 0.0)
        if not -2.0 <= value <= 2.0:
            raise InputRejected(f"{name} must be in [-2, 2], got {value}.")
    repetition = values.get("repetition_penalty", 1.0)
    if not 0.0 < repetition <= 2.0:
        raise InputRejected(
            f"repetition_penalty must be in (0, 2] (1.0 = no penalty), got {repetition}."
        )
    _verify_lengths(values)


def _verify_lengths(values: dict[str, Any]) -> None:
    min_new = values.get("min_new_tokens", 0)
    if min_new < 0:
        raise InputRejected(f"min_new_tokens must be in [0, max_new_tokens], got {min_new}.")
    max_new = values.get("max_new_tokens", DEFAULT_MAX_NEW_TOKENS)
    if max_new < 0:
        raise InputRejected(f"max_new_tokens must be at least 0, got {max_new}.")
    if not min_new <= max_new:
        raise InputRejected(
            f"min_new_tokens must be in [0, max_new_tokens({max_new})], got {min_new}."
        )
    grammars = [values.get(k) for k in ("json_schema", "regex", "ebnf")]
    if sum(g is not None for g in grammars) > 1:
        raise InputRejected("Only one of regex, json_schema, or ebnf can be set.")


def _logprob_spec(body: dict[str, Any], index: int, count: int) -> LogprobSpec:
    def pick(name: str, default: Any) -> Any:
        return _per_item(body.get(name), count, name, default)[index]

    return LogprobSpec(
        enabled=_truthy(pick("return_logprob", False)),
        start_len=int(pick("logprob_start_len", -1)),
        top_num=int(pick("top_logprobs_num", 0)),
        with_text=_truthy(body.get("return_text_in_logprobs")),
    )


def _check_duplicates(rids: list[str], in_flight: Container[str]) -> None:
    seen: set[str] = set()
    for rid in rids:
        if rid in in_flight or rid in seen:
            raise InputRejected(f"Duplicate request ID detected: {rid}")
        seen.add(rid)


def _truthy(value: Any) -> bool:
    return bool(value) and value not in ("false", "f", "no", "n", "off", "0")
