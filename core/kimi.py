"""Kimi-K2 / K2.5 token ids, used only as defaults.

The running code reads boundary ids from the loaded tokenizer by token name;
these numbers are what the real checkpoint (and the bundled tiny tokenizer) use.
"""

from __future__ import annotations

from typing import Final

BOS: Final = 163584
EOS: Final = 163585
IM_END: Final = 163586
IM_USER: Final = 163587
IM_ASSISTANT: Final = 163588
IM_SYSTEM: Final = 163594
TOOL_CALLS_SECTION_BEGIN: Final = 163595
TOOL_CALLS_SECTION_END: Final = 163596
TOOL_CALL_BEGIN: Final = 163597
TOOL_CALL_ARGUMENT_BEGIN: Final = 163598
TOOL_CALL_END: Final = 163599
IM_MIDDLE: Final = 163601
THINK: Final = 163606
THINK_END: Final = 163607
UNK: Final = 163838
PAD: Final = 163839
VOCAB_SIZE: Final = 163840

TOOL_CALL_IDS: Final = frozenset(
    {
        TOOL_CALLS_SECTION_BEGIN,
        TOOL_CALLS_SECTION_END,
        TOOL_CALL_BEGIN,
        TOOL_CALL_ARGUMENT_BEGIN,
        TOOL_CALL_END,
    }
)

# Token names, so code can look the ids up in whatever tokenizer is loaded.
THINK_TOKEN: Final = "<think>"
THINK_END_TOKEN: Final = "</think>"
STOP_TOKEN: Final = "<|im_end|>"
TOOL_CALL_TOKENS: Final = (
    "<|tool_calls_section_begin|>",
    "<|tool_calls_section_end|>",
    "<|tool_call_begin|>",
    "<|tool_call_argument_begin|>",
    "<|tool_call_end|>",
)
