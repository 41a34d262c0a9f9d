"""The fake model: a deterministic token plan per request, shaped like Kimi-K2.5's output.

A prompt ending with ``<think>`` gets reasoning, ``</think>``, then an answer or
(when the prompt declared tools and no tool result is pending) a tool-call
section, then the stop token. Half of the tool calls (by the prompt's seed) are the
canonical call (see ``OBEDIENT_ONE_IN``), the others random. Words are real English,
encoded with the served tokenizer and cached, so the ids decode to readable text. The plan
is an endless iterator: the scheduler decides where it stops (EOS, ``stop_token_ids``,
``max_new_tokens``, ``ignore_eos``).
"""

from __future__ import annotations

import hashlib
import random
from array import array
from collections.abc import Iterator, Sequence
from typing import Final

from eagle_tui.core.sim.model.modeldir import ModelDir
from eagle_tui.core.sim.model.prompt_shape import PromptShape, read_prompt
from eagle_tui.core.sim.model.tool_calls import (
    call_arguments,
    canonical_arguments,
    declared_tools,
)

RUNAWAY_ONE_IN: Final = 12  # this share of outputs loops and never ends (finish: length)
# This share of tool calls is the canonical one (first declared tool, every argument the
# first ARGUMENT_WORDS value): a dataset holding that call sees the model match it, the
# rest diverge, both decided by the prompt, so multi-turn capture meets both paths.
OBEDIENT_ONE_IN: Final = 2
_GREEDY_EPS: Final = 1e-6  # SGLang treats temperature below this as greedy


# The vocabulary: plain English, so planned ids decode to readable text.
def _word_list(text: str) -> tuple[str, ...]:
    return tuple(text.split())


REASONING_WORDS: Final = _word_list(
    """
    let me think about this carefully the user wants to know how we should approach
    first consider what is being asked and which parts matter most then check each
    step so the answer stays correct maybe there is a simpler way to see it since the
    question mentions a few details I need to keep track of them also remember that
    edge cases could change the result so verify the assumptions before answering
    actually wait that does not quite work because the numbers do not add up let me
    try again from the start okay now it looks consistent with the constraints
    """
)

ANSWER_WORDS: Final = _word_list(
    """
    here is a short answer to your question the main idea is simple you can start
    with the first step and then continue until the result is ready in practice this
    works well for most cases but keep an eye on the details that matter for your
    setup if anything is unclear feel free to ask again and I will explain it in more
    depth with an example that shows each part of the process
    """
)


def plan_seed(prompt: Sequence[int], temperature: float, top_p: float, top_k: int,
              sampling_seed: int | None) -> int:
    """A seed from the prompt and the sampling knobs that change a real model's output.

    Greedy decoding ignores ``sampling_seed`` (it is deterministic anyway);
    ``stop_token_ids`` and ``max_new_tokens`` are left out on purpose, so they only
    truncate the same plan.
    """
    digest = hashlib.blake2b(array("q", prompt).tobytes(), digest_size=8)
    if temperature < _GREEDY_EPS:
        digest.update(b"greedy")
    else:
        digest.update(repr((float(temperature), float(top_p), top_k, sampling_seed)).encode())
    return int.from_bytes(digest.digest(), "little")


class FakeModel:
    """Plans outputs for prompts of the served tokenizer."""

    def __init__(self, model: ModelDir) -> None:
        self._model = model
        self._words: dict[tuple[str, bool], tuple[int, ...]] = {}
        self._period = tuple(model.encode("."))
        self._paragraph = tuple(model.encode("\n\n"))
        self._stop = model.eos_ids[0] if model.eos_ids else None
        for word in (*REASONING_WORDS, *ANSWER_WORDS):  # encode the vocabulary once, up front
            self._word(word, capital=False)
            self._word(word, capital=True)

    def plan(self, prompt: Sequence[int], seed: int) -> Iterator[int]:
        """The endless output of ``prompt`` under ``seed``."""
        rng = random.Random(seed)
        shape = read_prompt(prompt, self._model)
        runaway = rng.randrange(RUNAWAY_ONE_IN) == 0
        think_end = self._model.special.think_end
        if shape.thinking and think_end is not None:
            yield from self._prose(rng, REASONING_WORDS, rng.randint(12, 80), paragraphs=True)
            if runaway:
                yield from self._loop(rng, REASONING_WORDS)
            yield think_end
        elif runaway:
            yield from self._loop(rng, ANSWER_WORDS)
        if self._calls_tool(shape):
            yield from self._tool_section(rng, shape.tools_text or "")
        else:
            yield from self._prose(rng, ANSWER_WORDS, rng.randint(5, 40), paragraphs=False)
        if self._stop is not None:
            yield self._stop
        yield from self._forever(rng, ANSWER_WORDS)  # what ignore_eos gets past the stop token

    def _calls_tool(self, shape: PromptShape) -> bool:
        return (shape.tools_text is not None and not shape.answered_tool
                and self._model.special.has_tool_tokens)

    def _tool_section(self, rng: random.Random, tools_text: str) -> Iterator[int]:
        special = self._model.special
        tools = declared_tools(tools_text)
        if rng.randrange(OBEDIENT_ONE_IN) == 0:  # the call a dataset most likely holds
            calls = [(tools[0], canonical_arguments(tools[0]))]
        else:
            if rng.randrange(3) == 0:  # sometimes a word of content before the calls
                yield from self._prose(rng, ANSWER_WORDS, rng.randint(3, 10), paragraphs=False)
            calls = [(tool, call_arguments(tool, rng))
                     for tool in (rng.choice(tools) for _ in range(1 if rng.randrange(4) else 2))]
        yield special.section_begin or 0
        for index, (tool, arguments) in enumerate(calls):
            yield special.call_begin or 0
            yield from self._model.encode(f"functions.{tool.name}:{index}")
            yield special.argument_begin or 0
            yield from self._model.encode(arguments)
            yield special.call_end or 0
        yield special.section_end or 0

    def _prose(self, rng: random.Random, words: Sequence[str], count: int,
               *, paragraphs: bool) -> Iterator[int]:
        sentence_left = 0
        sentences = 0
        for _ in range(count):
            starts_sentence = sentence_left == 0
            if starts_sentence:
                sentence_left = rng.randint(6, 14)
            yield from self._word(rng.choice(words), capital=starts_sentence)
            sentence_left -= 1
            if sentence_left == 0:
                yield from self._period
                sentences += 1
                if paragraphs and sentences % rng.randint(2, 4) == 0:
                    yield from self._paragraph
        if sentence_left:
            yield from self._period

    def _loop(self, rng: random.Random, words: Sequence[str]) -> Iterator[int]:
        """A runaway: one sentence over and over, as a real model stuck in a loop (its
        unique-bigram ratio falls toward 0 and a drafter predicts it perfectly)."""
        sentence = tuple(self._prose(rng, words, rng.randint(6, 14), paragraphs=False))
        while True:
            yield from sentence

    def _forever(self, rng: random.Random, words: Sequence[str]) -> Iterator[int]:
        while True:
            yield from self._prose(rng, words, 12, paragraphs=False)

    def _word(self, word: str, *, capital: bool) -> tuple[int, ...]:
        key = (word, capital)
        ids = self._words.get(key)
        if ids is None:
            ids = tuple(self._model.encode(" " + (word.capitalize() if capital else word)))
            self._words[key] = ids
        return ids
