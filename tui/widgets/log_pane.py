"""A server-log pane: a ``Log`` fed in batches from a bounded ring buffer.

- ``add_lines`` takes a batch (the caller coalesces reads to a few per second); lines go
  into the ring buffer and, when they match the filter, into the ``Log`` in one call.
- The filter is a regular expression (smart case: case-insensitive unless it has a capital);
  changing it re-feeds the ``Log`` from the ring buffer. A bad pattern is shown, not raised.
- Quiet (on until ``h``): ``/health`` and ``/metrics`` access lines (our own polling) and
  progress-bar redraws short of 100% are not listed (the live bar shows below the log).
- Follow: new lines scroll into view while on; scrolling up turns it off; ``f`` or End turn
  it back on.
- Error and warning lines are highlighted (styles ``log-pane--error``/``--warning``).
- The unterminated last line (a progress bar being redrawn with ``\\r``) shows below the log.
Text is always literal: ``Log`` renders plain strings, never markup, and every line has its
control and escape characters made visible first (``core.text.terminal_safe``).
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable, Sequence
from typing import ClassVar, Protocol

from rich.highlighter import Highlighter
from rich.style import Style
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.message import Message
from textual.reactive import reactive
from textual.strip import Strip
from textual.timer import Timer
from textual.widgets import Input, Log, Static

from eagle_tui.core.text import terminal_safe

ERROR_LINE = re.compile(
    r"\b(ERROR|CRITICAL|FATAL|Traceback|Exception|\w+Error\b|out of memory|Killed)",
)
WARNING_LINE = re.compile(r"\b(WARNING|WARN)\b")
HEALTH_NOISE = re.compile(r'"GET /(health|health_generate|metrics) HTTP/[\d.]+" ')
BAR_REDRAW = re.compile(r"(?<![\d.])\d{1,2}%\s*(?:Completed\s*)?\|")
"""A progress bar (tqdm) state short of 100%: one of the many redraws of the same line."""


class QuietFilter:
    """Lines hidden while "quiet" is on: our own ``/health`` polls, unfinished bar redraws."""

    def search(self, line: str) -> bool:
        return bool(HEALTH_NOISE.search(line) or BAR_REDRAW.search(line))


QUIET = QuietFilter()
FILTER_DELAY_S = 0.15


class LogBuffer:
    """The newest ``capacity`` lines, and which of them match a filter."""

    def __init__(self, capacity: int = 5000) -> None:
        self.capacity = capacity
        self._lines: deque[str] = deque(maxlen=capacity)

    def __len__(self) -> int:
        return len(self._lines)

    def extend(self, lines: Iterable[str]) -> None:
        """Append ``lines``; the oldest fall off beyond ``capacity``."""
        self._lines.extend(lines)

    def matching(self, pattern: Matcher | None, hide: Matcher | None = None) -> list[str]:
        """Every kept line that matches ``pattern`` and not ``hide`` (None: no condition)."""
        return filter_lines(self._lines, pattern, hide)


class Matcher(Protocol):
    """Anything with ``search(line)`` (a compiled regex, ``QUIET``)."""

    def search(self, line: str, /) -> object: ...


def filter_lines(
    lines: Iterable[str], pattern: Matcher | None, hide: Matcher | None = None
) -> list[str]:
    """``lines`` that match ``pattern`` (a search, not a full match) and not ``hide``."""
    return [
        line
        for line in lines
        if (pattern is None or pattern.search(line)) and (hide is None or not hide.search(line))
    ]


def compile_filter(text: str) -> re.Pattern[str] | None:
    """The filter for ``text`` (None when empty); smart case. Raises re.error."""
    if not text:
        return None
    flags = 0 if any(c.isupper() for c in text) else re.IGNORECASE
    return re.compile(text, flags)


class LineSeverityHighlighter(Highlighter):
    """Styles a whole line as an error or warning line."""

    def __init__(self) -> None:
        self.error_style = Style(bold=True)
        self.warning_style = Style()

    def highlight(self, text: Text) -> None:
        plain = text.plain
        if ERROR_LINE.search(plain):
            text.stylize(self.error_style)
        elif WARNING_LINE.search(plain):
            text.stylize(self.warning_style)


class ServerLog(Log):
    """``Log`` that reports the user scrolling up and highlights error lines."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"log-pane--error", "log-pane--warning"}

    class ScrolledUp(Message):
        """The user scrolled away from the end."""

    def __init__(self, *, max_lines: int) -> None:
        super().__init__(highlight=True, max_lines=max_lines, auto_scroll=True)
        self.severity = LineSeverityHighlighter()
        self.highlighter = self.severity
        self.refeeding = False
        self._styles_stale = True

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._styles_stale = True

    def render_line(self, y: int) -> Strip:
        if self._styles_stale:
            self._styles_stale = False
            self.severity.error_style = self.get_component_rich_style("log-pane--error")
            self.severity.warning_style = self.get_component_rich_style("log-pane--warning")
        return super().render_line(y)

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        if not self.refeeding and new_value < old_value and new_value < self.max_scroll_y:
            self.post_message(self.ScrolledUp())

    def replace_lines(self, lines: Sequence[str]) -> None:
        """Show exactly ``lines`` (used when the filter changes)."""
        self.refeeding = True
        try:
            self.clear()
            self.write_lines(lines, scroll_end=False)
        finally:
            self.refeeding = False
        if self.auto_scroll:
            self.scroll_end(animate=False, x_axis=False)


class LogPane(Vertical):
    """Filter box, follow state, the log, and the live partial line."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("f", "toggle_follow", "Follow", id="log.follow"),
        Binding("end", "follow_on", "End", show=False, id="log.end"),
        Binding("slash", "focus_filter", "Filter", id="log.filter"),
        Binding("h", "toggle_noise", "Quiet", id="log.noise"),
    ]
    HELP = "Server log. `/` filter (regex), `f` follow on/off, End jump to the end."

    follow: reactive[bool] = reactive(True)
    hide_noise: reactive[bool] = reactive(True)

    def __init__(self, buffer: LogBuffer | None = None, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.buffer = buffer if buffer is not None else LogBuffer()
        self._pattern: re.Pattern[str] | None = None
        self._filter_timer: Timer | None = None
        self._source_problem = ""

    def compose(self) -> ComposeResult:
        with Horizontal(classes="log-pane--bar"):
            yield Input(placeholder="/ filter (regex)", classes="log-pane--filter", compact=True)
            yield Static("", classes="log-pane--status", markup=False)
        yield ServerLog(max_lines=self.buffer.capacity)
        yield Static("", classes="log-pane--partial", markup=False)

    def on_mount(self) -> None:
        self._show_status()

    # -- feeding ---------------------------------------------------------------------------

    def add_lines(self, lines: Sequence[str]) -> None:
        """Add a batch of complete lines (one ``Log`` write for the whole batch)."""
        if not lines:
            return
        lines = [terminal_safe(line) for line in lines]  # a log is written by others
        self.buffer.extend(lines)
        shown = self._visible(lines)
        if shown:
            log = self.query_one(ServerLog)
            log.write_lines(shown, scroll_end=False)
            if self.follow:
                log.scroll_end(animate=False, x_axis=False)
        self._show_status()

    def use_buffer(self, buffer: LogBuffer) -> None:
        """Show ``buffer`` (another server's lines): the log is re-fed from it."""
        self.buffer = buffer
        self._refeed()

    def _visible(self, lines: Iterable[str]) -> list[str]:
        return filter_lines(lines, self._pattern, QUIET if self.hide_noise else None)

    def _refeed(self) -> None:
        self.query_one(ServerLog).replace_lines(self._visible(self.buffer.matching(None)))
        self._show_status()

    def action_toggle_noise(self) -> None:
        self.hide_noise = not self.hide_noise

    def watch_hide_noise(self) -> None:
        if self.is_mounted:
            self._refeed()

    def set_source_problem(self, problem: str | None) -> None:
        """Say what is wrong with the log source (a missing file…); None clears it."""
        self._source_problem = terminal_safe(problem or "")
        self._show_status()

    def set_partial(self, text: str) -> None:
        """Show the unterminated last line (empty hides it)."""
        partial = self.query_one(".log-pane--partial", Static)
        partial.update(Content(terminal_safe(text)))
        partial.display = bool(text)

    # -- follow ----------------------------------------------------------------------------

    def watch_follow(self, follow: bool) -> None:
        log = self.query_one(ServerLog)
        log.auto_scroll = follow
        if follow:
            log.scroll_end(animate=False, immediate=True)
        self._show_status()

    def action_toggle_follow(self) -> None:
        self.follow = not self.follow

    def action_follow_on(self) -> None:
        self.follow = True

    @on(ServerLog.ScrolledUp)
    def _user_scrolled_up(self, event: ServerLog.ScrolledUp) -> None:
        event.stop()
        self.follow = False

    # -- filter ----------------------------------------------------------------------------

    def action_focus_filter(self) -> None:
        self.query_one(Input).focus()

    @on(Input.Changed)
    def _filter_changed(self, event: Input.Changed) -> None:
        event.stop()
        if self._filter_timer is not None:
            self._filter_timer.stop()
        self._filter_timer = self.set_timer(FILTER_DELAY_S, self.apply_filter)

    @on(Input.Submitted)
    def _filter_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.apply_filter()
        self.query_one(ServerLog).focus()

    def apply_filter(self) -> None:
        """Compile the filter box's text and re-feed the log from the buffer."""
        box = self.query_one(Input)
        try:
            pattern = compile_filter(box.value)
        except re.error as exc:
            box.add_class("-invalid")
            self._show_status(f"bad regex: {exc}")
            return
        box.remove_class("-invalid")
        self._pattern = pattern
        self._refeed()

    @property
    def filter_error(self) -> bool:
        """True while the filter text is not a valid regex."""
        return self.query_one(Input).has_class("-invalid")

    def _show_status(self, problem: str = "") -> None:
        log = self.query_one(ServerLog)
        state = "following" if self.follow else "paused · f to follow"
        shown = f"{log.line_count}/{len(self.buffer)} lines" if self._pattern else ""
        if self.hide_noise:
            shown = " ".join(p for p in (shown, "quiet") if p)
        parts = (self._source_problem, problem, shown, state)
        text = "  ".join(part for part in parts if part)
        self.query_one(".log-pane--status", Static).update(Content(text))
