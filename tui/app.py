"""The Textual app: one mode per view, app-wide keys, help, palette commands and themes.

Thin on purpose: views live in ``tui.screens``, data comes from ``tui.sources`` (workers
over ``core`` clients), and this file only wires them together.
"""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path, PurePath
from typing import ClassVar

from textual import work
from textual.app import App, SystemCommand
from textual.binding import Binding, BindingType
from textual.driver import Driver
from textual.screen import Screen

from eagle_tui.core.clock import Clock, SystemClock
from eagle_tui.tui.clipboard import ClipboardReach, clipboard_reach
from eagle_tui.tui.driver import diffing_driver
from eagle_tui.tui.options import VIEW_TITLES, VIEWS, DashboardOptions
from eagle_tui.tui.render import literal
from eagle_tui.tui.render.fleet import FleetBoard
from eagle_tui.tui.screens.base import ViewScreen
from eagle_tui.tui.sources import Sources, default_sources
from eagle_tui.tui.termdiff import TerminalDiff
from eagle_tui.tui.themes import DEFAULT_THEME, load_themes, theme_dirs

log = logging.getLogger(__name__)

STYLES = Path(__file__).resolve().parent / "styles"
WORKER_THREADS = 512
"""Bound of the worker threads: one per watched server (a feed for the whole session, a
router's 64 workers included), plus the views' short reads."""


def first_mode(start_view: str) -> str:
    """The mode the app is composed in: the start view, or the Server view the Fleet view
    is fed by (``switch_view`` then moves on to it)."""
    return "server" if start_view == "fleet" else start_view


class EagleApp(App[int]):
    """The eagle-tui dashboard."""

    TITLE = "eagle-tui"
    HORIZONTAL_BREAKPOINTS: list[tuple[int, str]] | None = [(0, "-narrow"), (100, "-wide")]  # noqa: RUF012
    """Below 100 columns some views stack what sits side by side (``-narrow`` in the CSS)."""
    CSS_PATH: ClassVar[list[str | PurePath]] = [
        STYLES / "app.tcss",
        STYLES / "server.tcss",
        STYLES / "inspect.tcss",
        STYLES / "capture.tcss",
        STYLES / "tokens.tcss",
    ]
    BINDINGS: ClassVar[list[BindingType]] = [
        *(
            Binding(str(n), f"view('{view}')", VIEW_TITLES[view], show=False, id=f"view.{view}")
            for n, view in enumerate(VIEWS, start=1)
        ),
        Binding("question_mark,f1", "help", "Help", key_display="?", id="app.help"),
        Binding("q", "quit", "Quit", id="app.quit"),
        Binding("ctrl+l", "redraw", "Redraw", show=False, id="app.redraw"),
    ]

    def __init__(
        self,
        options: DashboardOptions | None = None,
        *,
        sources: Sources | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.frames = TerminalDiff(size=lambda: (self.size.width, self.size.height))
        """What the terminal shows: only changed cells are written (light on the wire)."""
        self.options = options or DashboardOptions()
        # Textual composes DEFAULT_MODE first: starting in the first view shown, rather
        # than in a blank screen switched away from, parses the stylesheet once less (three
        # parses at start-up become two). Set on the instance (setattr: Textual declares it
        # a ClassVar) before App.__init__ reads it; were it ignored, on_mount's switch_view
        # still shows the view, only slower.
        setattr(self, "DEFAULT_MODE", first_mode(self.options.start_view))  # noqa: B010
        super().__init__(driver_class=self.output_driver())
        self.clock: Clock = clock or SystemClock()
        self.sources = sources or default_sources(self.options, self.clock)
        self.watching: str | None = None
        """Id of the batch whose watched requests the Streams view shows."""
        self.auto_watch = False
        """Keep the Streams view's eight boxes streaming (ask for more as requests end)."""
        self.selected_batch: Path | None = None
        """The directory of the batch selected in the Capture view (Inspect opens it)."""
        self.inspect_request: Path | None = None
        """A batch directory the Inspect view is asked to open when it is shown next."""
        self.fleet = FleetBoard()
        """What the Server view's feeds last sent about each server (the Fleet view's rows)."""
        self.clipboard_reach = ClipboardReach("unknown", "not checked yet")
        """Whether a copy can reach the user's clipboard (checked off the UI thread)."""
        self._theme_problems = self._register_themes()
        self._add_view_modes()

    # -- set-up ----------------------------------------------------------------------------

    def _register_themes(self) -> tuple[str, ...]:
        loaded = load_themes((*theme_dirs(), *self.options.extra_theme_dirs))
        for theme in loaded.themes:
            self.register_theme(theme)
        wanted = self.options.theme
        if wanted in self.available_themes:
            self.theme = wanted
            return loaded.problems
        self.theme = DEFAULT_THEME if DEFAULT_THEME in self.available_themes else "textual-dark"
        known = ", ".join(sorted(self.available_themes))
        return (*loaded.problems, f"unknown theme {wanted!r}; known themes: {known}")

    def _add_view_modes(self) -> None:
        from eagle_tui.tui.screens.registry import view_screen_factory

        for view in VIEWS:
            factory: Callable[[], Screen[None]] = partial(view_screen_factory, view)
            self.add_mode(view, factory)

    def on_load(self) -> None:
        # Textual runs thread workers in the loop's default executor, whose size is
        # min(32, cores + 4): 6 on a 2-core host. Every watched server's feed is a worker
        # that runs for the whole session, so with more servers than that the rest never
        # started (and the views' short reads queued behind them). Threads are made only
        # when needed, so a large bound costs nothing until servers are watched.
        asyncio.get_running_loop().set_default_executor(
            ThreadPoolExecutor(max_workers=WORKER_THREADS, thread_name_prefix="eagle-worker"))

    def on_mount(self) -> None:
        self.switch_view(self.options.start_view)
        for problem in self._theme_problems:
            self.notify(literal.shown(problem), title="Theme", severity="warning", markup=False)
        # Full collections walking the start-up objects (Textual, widgets) took 50-190 ms
        # each, the worst event-loop stalls measured; what is alive after the first paint
        # lives for the session, so it is moved out of the collector's way.
        self.call_after_refresh(gc.freeze)
        self.call_after_refresh(self._check_clipboard)

    @work(thread=True, group="clipboard-check", exit_on_error=False)
    def _check_clipboard(self) -> None:
        self.clipboard_reach = clipboard_reach()  # may ask tmux: not on the UI thread

    def on_unmount(self) -> None:
        if self.sources.slurm is not None:
            self.sources.slurm.close()
        if self.sources.capture is not None:
            try:
                self.sources.capture.close()
            except Exception:  # never let clean-up turn a quit into a crash
                log.exception("closing capture batches failed")

    # -- output ------------------------------------------------------------------------------

    def output_driver(self) -> type[Driver] | None:
        """Textual's driver for this terminal, sending only the cells that changed (None:
        Textual's own choice, unchanged)."""
        return diffing_driver(self.get_driver_class(), self.frames)

    def action_redraw(self) -> None:
        """Send the whole screen again (after something else wrote to the terminal)."""
        self.frames.reset()
        self.screen.refresh()

    # -- views -----------------------------------------------------------------------------

    def switch_view(self, view: str) -> None:
        """Show ``view`` (one of ``VIEWS``); unknown names are ignored. The Fleet view shows
        what the Server view's feeds see, so the Server view is started first."""
        if view == "fleet" and not self.fleet.watching and self.current_mode != "server":
            self.switch_mode("server")
        if view in VIEWS and view != self.current_mode:
            self.switch_mode(view)

    def open_server(self, index: int) -> None:
        """The Server view with server ``index``'s card and log selected."""
        self.switch_view("server")
        screen = self.screen
        if isinstance(screen, ViewScreen) and screen.VIEW == "server":
            screen.show_server(index)

    def action_view(self, view: str) -> None:
        self.switch_view(view)

    def inspect(self, directory: Path) -> None:
        """Show ``directory`` in the Inspect view."""
        self.inspect_request = directory
        self.switch_view("inspect")

    def action_help(self) -> None:
        """Show help for the current view (or close it when it is open)."""
        from eagle_tui.tui.screens.help import (  # Markdown: imported on first use
            HelpScreen,
            key_entries,
        )

        if isinstance(self.screen, HelpScreen):
            self.screen.dismiss()
            return
        view = self.screen if isinstance(self.screen, ViewScreen) else None
        keys = key_entries(self.screen.active_bindings.values(), self.get_key_display)
        title = VIEW_TITLES.get(view.VIEW, "eagle-tui") if view else "eagle-tui"
        text = view.HELP_TEXT if view else ""
        self.push_screen(HelpScreen(title, text, keys))

    # -- command palette -------------------------------------------------------------------

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        for number, view in enumerate(VIEWS, start=1):
            title = VIEW_TITLES[view]
            yield SystemCommand(
                literal.shown(f"View: {title}"),
                literal.shown(f"Switch to the {title} view (key {number})"),
                partial(self.switch_view, view),
            )
        yield SystemCommand("Help", "Help and keys of the current view (? or F1)", self.action_help)
        if isinstance(screen, ViewScreen):
            yield from screen.palette_commands()
        yield from super().get_system_commands(screen)
