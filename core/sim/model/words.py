"""The fake model's vocabulary of plain English words (encoded once at start-up)."""

from __future__ import annotations

from typing import Final


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

ARGUMENT_WORDS: Final = ("Paris", "Berlin", "Tokyo", "latest news", "weather", "report", "42",
                         "python", "summary", "today")
