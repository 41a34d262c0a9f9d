"""Turn one raw log line into a typed event; never raises.

A line that no rule recognises, or whose match cannot be converted (a number too odd to
parse), becomes ``OtherLine``: the watcher still counts it, as a sign of life and in the
count of lines it could not read.
"""

from __future__ import annotations

import re

from eagle_tui.core.serverlog import events as ev
from eagle_tui.core.serverlog.patterns import RULES
from eagle_tui.core.serverlog.prefix import peel

# A line longer than this is cut before matching: the regexes stay linear and a runaway
# writer (a binary blob, a megabyte of JSON) cannot stall the watcher.
MAX_LINE_CHARS = 64 * 1024


# A log record glued to the end of an unterminated tqdm bar ("… 21/36 [00:00<…][2026-…"),
# whatever the record starts with once the bar's "it/s]" or "s/it]" has closed it.
_GLUED = re.compile(
    r"(?<=.)(?=\[\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d{3})?[\] ])"
    r"|(?<=/s\])(?=\S)|(?<=/it\])(?=\S)"
)


def split_glued(text: str) -> list[str]:
    """Split a line where a logging record was written right after an unfinished bar.

    tqdm leaves its bar without a newline when the process fails mid-bar, so the next
    record (often the fatal one) starts on the bar's line; each part is a line of its own.
    """
    if "[" not in text[1:] and "]" not in text:
        return [text]
    return [part for part in _GLUED.split(text[:MAX_LINE_CHARS]) if part]


def split_prefix(text: str, *, partial: bool = False) -> ev.LogLine:
    """Split every recognised prefix (timestamp, rank tags, wrappers) from the message."""
    found = peel(text)
    return ev.LogLine(
        text=text,
        message=found.message,
        timestamp=found.stamp_text,
        ranks=found.ranks,
        partial=partial,
        stamp=found.stamp,
        service=found.service,
    )


def parse_line(text: str, *, partial: bool = False) -> ev.LogEvent:
    """The event for one line (``partial`` for an unterminated tail such as a live tqdm bar)."""
    text = text[:MAX_LINE_CHARS]
    line = split_prefix(text, partial=partial)
    for rule in RULES:
        subject = line.message if rule.scope == "message" else line.text
        match = rule.regex.search(subject)
        if match is None:
            continue
        try:
            return rule.build(match, line)
        except (ValueError, OverflowError, IndexError):
            break
    return ev.OtherLine(line)


def which_rule(text: str) -> str | None:
    """The name of the rule that recognises ``text`` (for tests and debugging)."""
    line = split_prefix(text[:MAX_LINE_CHARS])
    for rule in RULES:
        if rule.regex.search(line.message if rule.scope == "message" else line.text):
            return rule.name
    return None


def parse_text(text: str, *, partial: bool = False) -> list[ev.LogEvent]:
    """Every event in one raw line: carriage-return updates and glued records split apart."""
    return [
        parse_line(part, partial=partial)
        for piece in text.split("\r")
        if piece.strip()
        for part in split_glued(piece)
    ]


def parse_lines(lines: list[str]) -> list[ev.LogEvent]:
    """``parse_line`` over complete lines (glued records split apart), skipping blank ones."""
    return [parse_line(part) for text in lines if text.strip() for part in split_glued(text)]
