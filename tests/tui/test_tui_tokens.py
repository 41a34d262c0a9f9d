"""Token documents and their rendering: literal text, markers, raw ids, no markup parsing."""

from __future__ import annotations

from textual.app import App, ComposeResult

from eagle_tui.core import kimi
from eagle_tui.tui.render.tokens import (
    build_document,
    document_content,
    kimi_token_text,
    marker_label,
)
from eagle_tui.tui.sources.documents import KIMI_BOUNDARIES
from eagle_tui.tui.widgets.token_view import TokenLegend, TokenView

TRICKY = {1: "[INST] hello [/INST]", 2: " a [/] b", 3: " [bold not bold", 4: " list[int]"}
PROMPT = [kimi.IM_USER, 1, kimi.IM_END, kimi.IM_ASSISTANT, kimi.THINK]
OUTPUT = [
    2,
    kimi.THINK_END,
    3,
    kimi.TOOL_CALLS_SECTION_BEGIN,
    kimi.TOOL_CALL_BEGIN,
    4,
    kimi.TOOL_CALL_END,
    kimi.TOOL_CALLS_SECTION_END,
    kimi.IM_END,
]


def fake_decode(ids: object) -> str:
    return "".join(TRICKY.get(i, f"<{i}>") for i in ids)  # type: ignore[attr-defined]


def document():
    return build_document(
        PROMPT + OUTPUT,
        len(PROMPT),
        KIMI_BOUNDARIES,
        decode=fake_decode,
        token_text=kimi_token_text,
    )


def test_every_kind_and_marker_in_order() -> None:
    kinds = [piece.kind for piece in document().pieces]
    assert kinds == [
        "prompt",
        "think_start",
        "reasoning",
        "think_end",
        "answer",
        "tool_call",
        "tool_call",
        "tool_args",
        "tool_call",
        "tool_call",
        "stop",
    ]


def test_markers_name_the_boundary_tokens() -> None:
    assert marker_label("think_start") == "‹think›"
    assert marker_label("think_end") == "‹/think›"
    assert marker_label("stop") == "‹stop›"
    assert marker_label("tool_call", "<|tool_call_begin|>") == "‹call›"
    assert marker_label("tool_call", None) == "‹tool›"


def test_text_is_literal_never_markup() -> None:
    plain = document_content(document(), "text", {}).plain
    for text in TRICKY.values():
        assert text in plain
    assert "‹think›" in plain and "‹/think›" in plain and "‹stop›" in plain


def test_raw_ids_mode_shows_every_id_and_marks_boundaries() -> None:
    plain = document_content(document(), "ids", {}).plain
    assert f"‹think›{kimi.THINK}" in plain
    assert f"‹/think›{kimi.THINK_END}" in plain
    assert f"‹stop›{kimi.IM_END}" in plain
    assert " 2 " in plain


def test_undecoded_document_falls_back_to_ids() -> None:
    doc = build_document(PROMPT + OUTPUT, len(PROMPT), KIMI_BOUNDARIES)
    assert not doc.decoded
    assert "163607" not in document_content(doc, "text", {}).plain  # the marker, not the id
    assert "‹/think›" in document_content(doc, "text", {}).plain


def test_prompt_can_be_hidden() -> None:
    plain = document_content(document(), "text", {}, show_prompt=False).plain
    assert "[INST]" not in plain and "‹think›" in plain


class TokenApp(App[None]):
    CSS_PATH = "../../tui/styles/tokens.tcss"

    def compose(self) -> ComposeResult:
        yield TokenLegend()
        yield TokenView(document())


async def test_token_view_renders_tricky_text_without_crashing() -> None:
    app = TokenApp()
    async with app.run_test(size=(160, 12)) as pilot:
        await pilot.pause()
        view = app.query_one(TokenView)
        rendered = "".join(strip.text for strip in view.render_lines(view.region.reset_offset))
        assert "[INST] hello [/INST]" in rendered
        assert "a [/] b" in rendered
        assert "[bold not bold" in rendered
        view.toggle_mode()
        await pilot.pause()
        assert view.mode == "ids"
        rendered = "".join(strip.text for strip in view.render_lines(view.region.reset_offset))
        assert str(kimi.THINK_END) in rendered
