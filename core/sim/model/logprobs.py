"""Made-up but stable log-probabilities for ``return_logprob`` requests.

Shapes follow the recording: entries are ``[logprob, token_id, text_or_null]``;
the first prompt token has a null logprob; top-k rows list the chosen token first.
Values are derived from (position, token) so repeated requests agree.
"""

from __future__ import annotations

from typing import Any

from eagle_tui.core.sim.model.modeldir import ModelDir
from eagle_tui.core.sim.request import SimRequest


def logprob_fields(model: ModelDir, request: SimRequest, start: int, upto: int) -> dict[str, Any]:
    """The logprob keys of ``meta_info`` for output ids ``[start, upto)``."""
    spec = request.item.logprobs
    prompt = request.item.input_ids
    first_input = len(prompt) if spec.start_len < 0 else min(spec.start_len, len(prompt))
    input_positions = range(first_input, len(prompt)) if start == 0 else range(0)
    outputs = request.output_ids
    fields: dict[str, Any] = {
        "input_token_logprobs": [
            [None if pos == 0 else _value(pos, prompt[pos]), prompt[pos],
             _text(model, prompt[pos], spec.with_text)] for pos in input_positions
        ],
        "output_token_logprobs": [
            _entry(model, len(prompt) + pos, outputs[pos], spec.with_text)
            for pos in range(start, upto)
        ],
        "output_token_logprobs_length": upto - start,
    }
    if spec.top_num > 0:
        fields["input_top_logprobs"] = [
            None if pos == 0 else _top(model, pos, prompt[pos], spec.top_num, spec.with_text)
            for pos in input_positions
        ]
        fields["output_top_logprobs"] = [
            _top(model, len(prompt) + pos, outputs[pos], spec.top_num, spec.with_text)
            for pos in range(start, upto)
        ]
    return fields


def _value(position: int, token: int) -> float:
    mixed = (position * 2654435761 + token * 40503) % 100_003
    return -mixed / 20_000.0


def _text(model: ModelDir, token: int, wanted: bool) -> str | None:
    return model.decode([token], skip_special_tokens=False) if wanted else None


def _entry(model: ModelDir, position: int, token: int, with_text: bool) -> list[Any]:
    return [_value(position, token) / 4, token, _text(model, token, with_text)]


def _top(model: ModelDir, position: int, token: int, count: int, with_text: bool) -> list[Any]:
    row = [_entry(model, position, token, with_text)]
    for rank in range(1, count):
        other = (token + rank * 7919) % max(model.vocab_size, 1)
        row.append([row[0][0] - rank * 0.75, other, _text(model, other, with_text)])
    return row
