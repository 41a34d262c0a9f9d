"""What every view screen shares: the view bar on top, the footer below, help text, palette
commands, and the one keyboard model: ``Esc`` leaves any text input, ``Tab``/``Shift+Tab``
move between fields in the order keys arrive (a burst of keys over a laggy link or a paste
stays in its field), ``/`` searches the view's table in a search box."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, ClassVar, cast

from textual import on
from textual.app import ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.containers import ScrollableContainer
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Footer, Input

from eagle_tui.tui.widgets.field import Field
from eagle_tui.tui.widgets.nav_table import NavTable, SearchableTable
from eagle_tui.tui.widgets.view_tabs import ViewTab, ViewTabs

if TYPE_CHECKING:
    from eagle_tui.tui.app import EagleApp

def scroll_keys(screen: str, *, top: str = "g", bottom: str = "G") -> list[BindingType]:
    """j/k scroll a few lines, ``top``/``bottom`` go to either end (``scroll``/``edge``
    actions, see :func:`scroll_lines` and :func:`scroll_edge`); ids ``<screen>.down``…"""
    return [
        Binding("j", "scroll(1)", "Down", show=False, id=f"{screen}.down"),
        Binding("k", "scroll(-1)", "Up", show=False, id=f"{screen}.up"),
        Binding(top, "edge(0)", "Top", show=False, id=f"{screen}.top"),
        Binding(bottom, "edge(1)", "Bottom", show=False, id=f"{screen}.bottom"),
    ]


def scroll_lines(body: ScrollableContainer, step: int) -> None:
    """Three lines a step (negative: up), at once."""
    body.scroll_relative(y=step * 3, animate=False)


def scroll_edge(body: ScrollableContainer, end: int) -> None:
    """The top (``end`` 0) or the bottom, at once."""
    if end:
        body.scroll_end(animate=False)
    else:
        body.scroll_home(animate=False)


FIELD_KEYS: list[BindingType] = [
    # Priority: handled when the key arrives, before later keys of a burst are handed to a
    # field; otherwise keys typed after a Tab can still land in the field it left.
    Binding("tab", "app.focus_next", "Next field", show=False, priority=True, id="field.next"),
    Binding("shift+tab", "app.focus_previous", "Previous field", show=False, priority=True,
            id="field.prev"),
    # Esc too: it moves the keys out of the field, so the next key of a burst is the view's.
    Binding("escape", "leave_input", "Leave field", show=False, priority=True,
            id="field.leave"),
    # Enter in a field that hands the keys back (the search box, Inspect's path): the focus
    # moves before the next key of the burst is delivered (`…⏎q` quits, not types `q`).
    Binding("enter", "submit_field", "Submit field", show=False, priority=True,
            id="field.submit"),
]


class SearchBox(Field):
    """The view's search box (shown by ``/`` in a table; Enter searches, Esc leaves)."""

    LEAVES_ON_ENTER = True


class ViewScreen(Screen[None]):
    """Base of the four views. Subclasses set ``VIEW`` and ``HELP_TEXT`` and compose the body."""

    VIEW: ClassVar[str] = ""
    HELP_TEXT: ClassVar[str] = ""
    """Markdown shown by ? / F1 above the list of keys (our own text, never server text)."""

    MUTATING_ACTIONS: ClassVar[frozenset[str]] = frozenset()
    """Actions hidden in ``--readonly`` mode."""

    _footer_states: tuple[bool | None, ...] | None = None
    """What ``check_action`` said at the last ``refresh_footer_on_change`` (per instance
    once set)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        *FIELD_KEYS,
        # Priority: the search box has the keys before the next key of a burst arrives.
        Binding("slash", "open_search", "Search", key_display="/", priority=True,
                id="table.search"),
    ]

    @property
    def eagle(self) -> EagleApp:
        """The app, typed."""
        return cast("EagleApp", self.app)

    def compose(self) -> ComposeResult:
        yield ViewTabs(self.VIEW)
        yield from self.compose_body()
        box = SearchBox(placeholder="search the table (Enter: find, n/N: next/previous)",
                        id="view-search", compact=True)
        box.display = False
        yield box
        # The palette's hint sits in the view bar: in the footer it overlapped the keys at 80
        # columns.
        yield Footer(compact=True, show_command_palette=False)

    def compose_body(self) -> ComposeResult:
        """The view's own widgets, between the view bar and the footer."""
        yield from ()

    def palette_commands(self) -> Iterable[SystemCommand]:
        """Commands this view adds to the command palette."""
        return ()

    def show_server(self, index: int) -> None:
        """Bring server ``index`` forward (the Server view selects its card and log)."""

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Hide mutating actions in read-only mode (False); otherwise ask ``action_state``."""
        if action in self.MUTATING_ACTIONS and self.eagle.options.readonly:
            return False
        if action == "leave_input":
            return isinstance(self.focused, Input)
        if action == "submit_field":
            return isinstance(self.focused, Field) and self.focused.LEAVES_ON_ENTER
        if action == "open_search":
            return isinstance(self.focused, SearchableTable)  # else "/" is the log's, or a letter
        return self.action_state(action)

    def action_state(self, action: str) -> bool | None:
        """True: available; None: shown greyed out (does not apply now); False: hidden."""
        return True

    def refresh_footer_on_change(self, actions: Iterable[str]) -> None:
        """``refresh_bindings`` only when one of ``actions`` changed state since the last
        call: Textual's Footer recomposes (mounts its keys again) on every refresh, which
        per tick or per snapshot cost several percent of a core at rest."""
        states = tuple(self.check_action(action, ()) for action in actions)
        if states != self._footer_states:
            self._footer_states = states
            self.refresh_bindings()

    def on_view_tab_chosen(self, message: ViewTab.Chosen) -> None:
        self.eagle.switch_view(message.view)

    # -- leaving fields and searching --------------------------------------------------------

    def action_leave_input(self) -> None:
        """Esc in a text field: give the keys back to the view (q quits again)."""
        box = self.query_one(SearchBox)
        box.display = False
        self.focus_main()

    def action_submit_field(self) -> None:
        """Enter in a field that gives the keys back: the focus moves now, so the rest of
        the burst is the view's; the submit is queued behind the keys the field has yet to
        type (they arrived before the Enter), so its ``Submitted`` carries all of them."""
        field = self.focused
        if isinstance(field, Field):
            self.focus_main()
            field.call_later(field.action_submit)

    def focus_main(self) -> None:
        """Focus the view's main widget (its table or log), else nothing."""
        target = self.main_widget()
        self.set_focus(target)  # at once: the next key of a burst goes to the target

    def main_widget(self) -> Widget | None:
        """What has the keys when no field does: the view's table (the one ``/`` searches)."""
        tables = self.query(NavTable)
        return tables.first() if tables else None

    def action_open_search(self) -> None:
        """``/`` in a table: the search box, focused at once."""
        box = self.query_one(SearchBox)
        box.display = True
        self.set_focus(box)

    @on(Input.Submitted, "#view-search")
    def _search(self, event: Input.Submitted) -> None:
        event.stop()
        event.input.display = False
        table = self.main_widget()
        if isinstance(table, SearchableTable):
            if self.focused is event.input:  # Enter moved it on already (submit_field)
                self.set_focus(table)
            self.search_table(table, event.value)

    def search_table(self, table: SearchableTable, text: str) -> None:
        """Find ``text`` in the rows shown (a view with more rows than it shows widens it)."""
        table.set_search(text)
