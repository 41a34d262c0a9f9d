"""Modals of the Capture view: the new-batch form and the drain-or-abort stop question."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Checkbox, Input, Label, Select, Static

from eagle_tui.core.errors import ConfigError
from eagle_tui.core.text import duration
from eagle_tui.tui.render import literal
from eagle_tui.tui.screens.base import FIELD_KEYS
from eagle_tui.tui.sources.capture import PRESETS, BatchRequest, validate_request
from eagle_tui.tui.widgets.field import Field

FORM_KEYS = "Tab next field · Esc leave the field · ctrl+s start · ctrl+g cancel"
FORM_KEYS_OUTSIDE = "no field has the keys: Tab back to the fields · ctrl+s start · ctrl+g cancel"

StopChoice = str
"""``drain`` or ``abort``."""


def parse_request(fields: dict[str, str], preset: str, resume: bool) -> BatchRequest:
    """A ``BatchRequest`` from the form's text fields; ConfigError naming the bad field."""
    servers = tuple(s.strip() for s in fields["servers"].replace(",", " ").split() if s.strip())
    for name in ("prompts", "out_dir", "tokenizer"):
        if not fields[name].strip():
            raise ConfigError(f"{name.replace('_', ' ')} is required")
    return BatchRequest(
        prompts=Path(fields["prompts"].strip()).expanduser(),
        out_dir=Path(fields["out_dir"].strip()).expanduser(),
        servers=servers,
        tokenizer=Path(fields["tokenizer"].strip()).expanduser(),
        preset=preset,
        concurrency=_positive(fields["concurrency"], "concurrency"),
        max_new_tokens=_positive(fields["max_new_tokens"], "max new tokens"),
        resume=resume,
        shard_rows=_positive(fields["shard_rows"], "rows per shard"),
        name=_name(fields["name"]),
    )


def _name(value: str) -> str:
    name = value.strip()
    if not name.isprintable():
        raise ConfigError("the batch name holds control characters; type a plain name")
    return name


def _positive(value: str, name: str) -> int:
    try:
        number = int(value.strip())
    except ValueError:
        raise ConfigError(f"{name} must be a whole number, got {value!r}") from None
    if number < 1:
        raise ConfigError(f"{name} must be at least 1")
    return number


class NewBatchScreen(ModalScreen[BatchRequest | None]):
    """Asks for a batch; validates it (in a worker) before dismissing with the request."""

    BINDINGS: ClassVar[list[BindingType]] = [
        *FIELD_KEYS,  # Esc leaves the field (typed paths stay); cancelling is its own key
        Binding("ctrl+g", "cancel", "Cancel", id="form.cancel"),
        Binding("ctrl+s", "submit", "Start", id="form.start"),
    ]
    FIELDS: ClassVar[tuple[tuple[str, str], ...]] = (
        ("prompts", "prompts file (JSONL or parquet)"),
        ("out_dir", "output directory"),
        ("servers", "servers (URLs, space or comma separated)"),
        ("tokenizer", "tokenizer directory"),
        ("concurrency", "concurrency"),
        ("max_new_tokens", "max new tokens"),
        ("shard_rows", "rows per shard"),
        ("name", "batch name"),
    )
    IN_A_ROW = 4
    """The last fields (short values) share one row: the form fits 80x24 whole."""

    def __init__(self, defaults: dict[str, str],
                 find_tokenizer: Callable[[], tuple[Path, str] | None] | None = None) -> None:
        """``find_tokenizer``: asks the servers for a local tokenizer directory (BLOCKING;
        run in a worker) when the tokenizer field has no default."""
        super().__init__()
        self._defaults = defaults
        self._find_tokenizer = find_tokenizer

    def on_mount(self) -> None:
        if self._find_tokenizer is not None and not self._defaults.get("tokenizer"):
            self._prefill_tokenizer(self._find_tokenizer)

    @work(thread=True, group="form-tokenizer", exit_on_error=False)
    def _prefill_tokenizer(self, find: Callable[[], tuple[Path, str] | None]) -> None:
        found = find()
        if found is not None:
            self.app.call_from_thread(self._use_tokenizer, *found)

    def _use_tokenizer(self, path: Path, server: str) -> None:
        """Fill the tokenizer field with the directory ``server`` names, unless typed in."""
        field = self.query_one("#form-tokenizer", Input)
        if field.value:
            return
        field.value = str(path)
        self.show_error(f"tokenizer: the directory {server}/model_info names")

    def compose(self) -> ComposeResult:
        with Vertical(id="form-box"):
            yield Static(literal.styled("New capture batch", "bold"), id="form-title")
            lines, row = self.FIELDS[:-self.IN_A_ROW], self.FIELDS[-self.IN_A_ROW:]
            for name, label in lines:
                yield from self._field(name, label)
            with Horizontal(classes="form-fields-row"):
                for name, label in row:
                    with Vertical():
                        yield from self._field(name, label)
            with Horizontal(classes="form-row"):
                yield Select(  # literal: the preset names, constants
                    [(name, name) for name in PRESETS],
                    value="greedy",
                    allow_blank=False,
                    id="form-preset",
                    compact=True,
                )
                yield Checkbox("resume an existing batch", id="form-resume", compact=True)
            yield Static(FORM_KEYS, id="form-keys", markup=False)
            yield Static("", id="form-error", markup=False)
            with Horizontal(id="form-buttons"):
                yield Button("Start (ctrl+s)", id="form-start", variant="primary")
                yield Button("Cancel (ctrl+g)", id="form-cancel")

    def _field(self, name: str, label: str) -> ComposeResult:
        yield Label(label)  # literal: FIELDS, constants
        placeholder = "the output directory's" if name == "name" else ""
        yield Field(self._defaults.get(name, ""), id=f"form-{name}", compact=True,
                    placeholder=placeholder,
                    select_on_focus=False)  # a burst typed after Tab appends

    def field_values(self) -> dict[str, str]:
        """The text of every field."""
        return {name: self.query_one(f"#form-{name}", Input).value for name, _ in self.FIELDS}

    @on(Button.Pressed, "#form-start")
    @on(Input.Submitted)
    def action_submit(self) -> None:
        preset = str(self.query_one("#form-preset", Select).value)
        resume = self.query_one("#form-resume", Checkbox).value
        try:
            request = parse_request(self.field_values(), preset, resume)
        except ConfigError as exc:
            self.show_error(str(exc))
            return
        self.show_error("checking …")
        self._validate(request)

    @work(thread=True, exclusive=True, group="form-validate", exit_on_error=False)
    def _validate(self, request: BatchRequest) -> None:
        try:
            validate_request(request)
        except Exception as exc:  # ConfigError and anything a file check raises
            self.app.call_from_thread(self.show_error, str(exc))
            return
        self.app.call_from_thread(self.dismiss, request)

    def show_error(self, message: str) -> None:
        """Say what is wrong (literal text)."""
        self.query_one("#form-error", Static).update(literal.content(message))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "leave_input":
            return isinstance(self.focused, Input)
        return True

    def action_leave_input(self) -> None:
        """Esc: out of the field, nothing lost (Tab comes back to the first field)."""
        self.set_focus(None)
        self.query_one("#form-keys", Static).update(FORM_KEYS_OUTSIDE)  # literal: constant

    def on_descendant_focus(self) -> None:
        self.query_one("#form-keys", Static).update(FORM_KEYS)  # literal: constant

    @on(Button.Pressed, "#form-cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)


def stop_question(batch_id: str, in_flight: int | None, grace_s: float | None) -> str:
    """What drain and abort do, in this batch's numbers (when known)."""
    requests = f"{in_flight} in-flight requests" if in_flight is not None else "in-flight requests"
    grace = duration(grace_s) if grace_s is not None else "the batch's stop grace period"
    return (
        f"Stop batch {batch_id}?\n"
        f"Drain: send nothing new; {requests} finish and are stored. Any still running after "
        f"{grace} are aborted (drain turns into abort then).\n"
        "Abort: cut in-flight requests now; they are not stored and are captured again on "
        "resume.\n"
        "Either way every finished sample is flushed to the shards; `r` resumes later."
    )


class StopBatchScreen(ModalScreen[StopChoice | None]):
    """Drain (finish in-flight requests), abort (cut them), or cancel."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("d", "choose('drain')", "Drain", id="stop.drain"),
        Binding("a", "choose('abort')", "Abort", id="stop.abort"),
        Binding("escape,n", "choose('')", "Cancel", id="stop.cancel"),
    ]

    def __init__(
        self, batch_id: str, *, in_flight: int | None = None, grace_s: float | None = None
    ) -> None:
        super().__init__()
        self._batch_id = batch_id
        self._in_flight = in_flight
        self._grace_s = grace_s

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm-box"):
            question = stop_question(self._batch_id, self._in_flight, self._grace_s)
            yield Static(literal.content(question), id="confirm-question")
            with Horizontal(id="confirm-buttons"):
                yield Button("Drain (d)", id="stop-drain", variant="warning")
                yield Button("Abort (a)", id="stop-abort", variant="error")
                yield Button("Cancel (n)", id="stop-cancel")

    def on_mount(self) -> None:
        self.query_one("#stop-cancel", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        choice = {"stop-drain": "drain", "stop-abort": "abort"}.get(event.button.id or "", "")
        self.action_choose(choice)

    def action_choose(self, choice: str) -> None:
        self.dismiss(choice or None)
