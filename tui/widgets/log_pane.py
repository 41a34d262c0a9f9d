"""A server-log pane: a ``Log`` fed in batches from a bounded ring buffer.

- ``add_lines`` takes a batch (the caller coalesces reads to one per redraw); lines go into
  the ring buffer and, as displayed, into the ``Log`` in one call.
- Search (``/``): a regular expression (smart case: case-insensitive unless it has a
  capital); its matches are highlighted, ``n``/``N`` jump to the next/previous matching
  line. "Matches only" (on until ``m``) lists just the matching lines (a filter). A bad
  pattern is shown, not raised.
- ``e``/``E`` jump to the next/previous error line; ``w`` wraps long lines; ``c`` collapses
  runs of lines that differ only in their tensor-parallel rank into one (on by default:
  an 8-rank server says everything eight times); ``t`` hides the time stamps.
- Quiet (on until ``h``): ``/health`` and ``/metrics`` access lines (our own polling) and
  progress-bar redraws short of 100% are not listed (the live bar shows below the log).
- Follow: new lines scroll into view while on; scrolling up (or ``k``, ``g``, a jump) turns
  it off; ``f``, End or ``G`` turn it back on.
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
from textual.message import Message
from textual.reactive import reactive
from textual.strip import Strip
from textual.timer import Timer
from textual.widgets import Input, Log, Static

from eagle_tui.core.serverlog.ourpolls import OUR_POLLS
from eagle_tui.core.text import terminal_safe
from eagle_tui.tui.render import literal
from eagle_tui.tui.render.logview import (
    RankGroup,
    collapse_ranks,
    find_line,
    strip_timestamp,
    wrap_line,
)
from eagle_tui.tui.widgets.field import Field

ERROR_LINE = re.compile(
    r"\b(ERROR|CRITICAL|FATAL|Traceback|Exception|\w+Error\b|out of memory|Killed)",
)
WARNING_LINE = re.compile(r"\b(WARNING|WARN)\b")
HEALTH_NOISE = OUR_POLLS
"""Our own polls: ``/health``, ``/metrics``, ``/server_info`` and ``/workers`` (is this
server a router?)."""
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
    """Styles a whole line as an error or warning line, and every search match in it."""

    def __init__(self) -> None:
        self.error_style = Style(bold=True)
        self.warning_style = Style()
        self.match_style = Style(reverse=True)
        self.pattern: re.Pattern[str] | None = None

    def highlight(self, text: Text) -> None:
        plain = text.plain
        if ERROR_LINE.search(plain):
            text.stylize(self.error_style)
        elif WARNING_LINE.search(plain):
            text.stylize(self.warning_style)
        if self.pattern is not None:
            for match in self.pattern.finditer(plain):
                if match.end() > match.start():
                    text.stylize(self.match_style, match.start(), match.end())


class ServerLog(Log):
    """``Log`` with the pane's keys (it has the focus), error and match highlighting, and a
    report when the user scrolls up."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "log-pane--error",
        "log-pane--warning",
        "log-pane--match",
    }
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("j", "scroll_down", "Down", show=False, id="log.down"),
        Binding("k", "line_up", "Up", show=False, id="log.up"),
        Binding("g,home", "top", "Top", show=False, id="log.top"),
        Binding("G,end", "follow", "End (follow)", show=False, id="log.end"),
        Binding("n", "search(1)", "Next match", show=False, id="log.next"),
        Binding("N", "search(-1)", "Prev match", show=False, id="log.prev"),
        Binding("e", "error(1)", "Next error", id="log.error"),
        Binding("E", "error(-1)", "Prev error", show=False, id="log.error_prev"),
    ]

    class ScrolledUp(Message):
        """The user scrolled away from the end."""

    class Jump(Message):
        """A key asked for a jump: ``what`` is follow, top, search or error."""

        def __init__(self, what: str, step: int = 1) -> None:
            super().__init__()
            self.what = what
            self.step = step

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
            self.severity.match_style = self.get_component_rich_style("log-pane--match")
        return super().render_line(y)

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        if not self.refeeding and new_value < old_value and new_value < self.max_scroll_y:
            self.post_message(self.ScrolledUp())

    def replace_lines(self, lines: Sequence[str]) -> None:
        """Show exactly ``lines`` (when what is shown changes: filter, modes, a new rank)."""
        keep_y = self.scroll_y
        self.refeeding = True
        try:
            self.clear()
            self.write_lines(lines, scroll_end=False)  # literal: made safe in add_lines
        finally:
            self.refeeding = False
        if self.auto_scroll:
            self.scroll_end(animate=False, x_axis=False)
        else:
            self.scroll_to(y=keep_y, animate=False)

    def action_line_up(self) -> None:
        self.scroll_up(animate=False)
        self.post_message(self.ScrolledUp())

    def action_top(self) -> None:
        self.post_message(self.Jump("top"))

    def action_follow(self) -> None:
        self.post_message(self.Jump("follow"))

    def action_search(self, step: int) -> None:
        self.post_message(self.Jump("search", step))

    def action_error(self, step: int) -> None:
        self.post_message(self.Jump("error", step))

    def show_line(self, index: int) -> None:
        """Scroll so line ``index`` is in view, a third of the way down."""
        self.scroll_to(y=max(0, index - self.size.height // 3), animate=False)


class LogSearchField(Field):
    """The log's search box: Enter searches and gives the keys back to the log (the Server
    view's main widget), at once, so a key typed after Enter in a burst is the log's."""

    LEAVES_ON_ENTER = True


class LogPane(Vertical):
    """Search box, modes, the log, and the live partial line."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("f", "toggle_follow", "Follow", id="log.follow"),
        # Priority: the search box has the keys before the next key of a burst arrives.
        Binding("slash", "focus_filter", "Search", key_display="/", priority=True,
                id="log.filter"),
        Binding("m", "toggle_matches_only", "Matches only", show=False, id="log.matches"),
        Binding("h", "toggle_noise", "Quiet", id="log.noise"),
        Binding("w", "toggle_wrap", "Wrap", show=False, id="log.wrap"),
        Binding("c", "toggle_collapse", "Collapse ranks", show=False, id="log.collapse"),
        Binding("t", "toggle_timestamps", "Timestamps", show=False, id="log.stamps"),
    ]
    HELP = "Server log. `/` search (regex), `n`/`N` next/previous match, `f` follow."

    follow: reactive[bool] = reactive(True)
    hide_noise: reactive[bool] = reactive(True)
    matches_only: reactive[bool] = reactive(True)
    wrap: reactive[bool] = reactive(False)
    collapse: reactive[bool] = reactive(True)
    timestamps: reactive[bool] = reactive(True)

    def __init__(self, buffer: LogBuffer | None = None, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.buffer = buffer if buffer is not None else LogBuffer()
        self._pattern: re.Pattern[str] | None = None
        self._filter_timer: Timer | None = None
        self._source_problem = ""
        self._open_group: RankGroup | None = None
        """The last line shown, while more ranks may still join it."""
        self._wrap_width = 0

    def compose(self) -> ComposeResult:
        with Horizontal(classes="log-pane--bar"):
            yield LogSearchField(placeholder="/ search (regex)", classes="log-pane--filter",
                                 compact=True)
            yield Static("", classes="log-pane--status", markup=False)
        yield ServerLog(max_lines=self.buffer.capacity)
        yield Static("", classes="log-pane--partial", markup=False)

    def on_mount(self) -> None:
        self._show_status()

    def on_resize(self) -> None:
        if self.wrap and self._log_width() != self._wrap_width:
            self._refeed()

    @property
    def server_log(self) -> ServerLog:
        """The log widget."""
        return self.query_one(ServerLog)

    # -- feeding ---------------------------------------------------------------------------

    def add_lines(self, lines: Sequence[str]) -> None:
        """Add a batch of complete lines (one ``Log`` write for the whole batch)."""
        if not lines:
            return
        lines = [terminal_safe(line) for line in lines]  # a log is written by others
        self.buffer.extend(lines)
        kept = self._kept(lines)
        if kept:
            shown = self._lines_to_show(kept, continue_open=True)
            if shown is None:  # the open line gained ranks: its text changed
                self._refeed()
                return
            log = self.server_log
            log.write_lines(shown, scroll_end=False)  # literal: made safe above
            if self.follow:
                log.scroll_end(animate=False, x_axis=False)
        self._show_status()

    def use_buffer(self, buffer: LogBuffer) -> None:
        """Show ``buffer`` (another server's lines): the log is re-fed from it."""
        self.buffer = buffer
        self._refeed()

    def _kept(self, lines: Iterable[str]) -> list[str]:
        pattern = self._pattern if self.matches_only else None
        return filter_lines(lines, pattern, QUIET if self.hide_noise else None)

    def _lines_to_show(self, lines: Sequence[str], *, continue_open: bool) -> list[str] | None:
        """Kept lines as shown: stamps, rank runs, wrapping. None when the first lines join
        the line shown last (more ranks): the caller re-feeds."""
        if not self.timestamps:
            lines = [strip_timestamp(line) for line in lines]
        if self.collapse:
            open_group = self._open_group if continue_open else None
            before = len(open_group.ranks) if open_group is not None else 0
            groups = list(collapse_ranks(lines, open_group))
            if open_group is not None and len(open_group.ranks) > before:
                return None
            if groups and groups[0] is open_group:
                groups = groups[1:]
            self._open_group = groups[-1] if groups else self._open_group
            lines = [group.text() for group in groups]
        if self.wrap:
            width = self._wrap_width = self._log_width()
            lines = [piece for line in lines for piece in wrap_line(line, width)]
        return list(lines)

    def _log_width(self) -> int:
        return max(0, self.server_log.scrollable_content_region.width - 1)

    def _refeed(self) -> None:
        self._open_group = None
        shown = self._lines_to_show(self._kept(self.buffer.matching(None)), continue_open=False)
        self.server_log.replace_lines(shown or [])
        self._show_status()

    def _toggle_and_refeed(self) -> None:
        if self.is_mounted:
            self._refeed()

    def action_toggle_noise(self) -> None:
        self.hide_noise = not self.hide_noise

    def watch_hide_noise(self) -> None:
        self._toggle_and_refeed()

    def action_toggle_matches_only(self) -> None:
        self.matches_only = not self.matches_only

    def watch_matches_only(self) -> None:
        self._toggle_and_refeed()

    def action_toggle_wrap(self) -> None:
        self.wrap = not self.wrap

    def watch_wrap(self) -> None:
        self._toggle_and_refeed()

    def action_toggle_collapse(self) -> None:
        self.collapse = not self.collapse

    def watch_collapse(self) -> None:
        self._toggle_and_refeed()

    def action_toggle_timestamps(self) -> None:
        self.timestamps = not self.timestamps

    def watch_timestamps(self) -> None:
        self._toggle_and_refeed()

    def set_source_problem(self, problem: str | None) -> None:
        """Say what is wrong with the log source (a missing file…); None clears it."""
        self._source_problem = terminal_safe(problem or "")
        self._show_status()

    def set_partial(self, text: str) -> None:
        """Show the unterminated last line (empty hides it)."""
        partial = self.query_one(".log-pane--partial", Static)
        partial.update(literal.content(text))
        partial.display = bool(text)

    # -- follow and jumps ------------------------------------------------------------------

    def watch_follow(self, follow: bool) -> None:
        log = self.server_log
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

    @on(ServerLog.Jump)
    def _jump(self, event: ServerLog.Jump) -> None:
        event.stop()
        if event.what == "follow":
            self.follow = True
        elif event.what == "top":
            self.follow = False
            self.server_log.scroll_home(animate=False)
        else:
            pattern = self._pattern if event.what == "search" else ERROR_LINE
            self.jump_to_match(pattern, event.step)

    def jump_to_match(self, pattern: re.Pattern[str] | None, step: int) -> int | None:
        """Show the next (``step`` 1) or previous (-1) line matching ``pattern``; its index."""
        log = self.server_log
        if pattern is None:
            self._show_status("no search: press / first")
            return None
        start = int(log.scroll_y) + log.size.height // 3
        index = find_line(log.lines, pattern, start, backwards=step < 0)
        if index is None:
            self._show_status(f"no line matches {pattern.pattern!r}")
            return None
        self.follow = False
        log.show_line(index)
        self._show_status(f"line {index + 1}/{log.line_count}")
        return index

    # -- search ----------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "focus_filter":  # "/" typed in a search box is a letter
            return not isinstance(self.screen.focused, Input)
        return True

    def action_focus_filter(self) -> None:
        self.screen.set_focus(self.query_one(Input))  # at once: the rest of a burst goes there

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
        if self.screen.focused is event.input:  # Enter moved it on already (submit_field)
            self.screen.set_focus(self.server_log)

    def apply_filter(self) -> None:
        """Compile the search box's text, highlight it and re-feed the log."""
        box = self.query_one(Input)
        try:
            pattern = compile_filter(box.value)
        except re.error as exc:
            box.add_class("-invalid")
            self._show_status(f"bad regex: {exc}")
            return
        box.remove_class("-invalid")
        self._pattern = pattern
        self.server_log.severity.pattern = pattern
        self._refeed()

    @property
    def filter_error(self) -> bool:
        """True while the search text is not a valid regex."""
        return self.query_one(Input).has_class("-invalid")

    def _show_status(self, problem: str = "") -> None:
        log = self.server_log
        state = "following" if self.follow else "paused · End to follow"
        shown = ""
        if self._pattern and self.matches_only:
            shown = f"{log.line_count}/{len(self.buffer)} lines"
        modes = [name for name, on in (("quiet", self.hide_noise), ("wrap", self.wrap),
                                       ("ranks folded", self.collapse),
                                       ("no stamps", not self.timestamps)) if on]
        parts = (self._source_problem, problem, shown, " ".join(modes), state)
        text = "  ".join(part for part in parts if part)
        self.query_one(".log-pane--status", Static).update(literal.content(text))
