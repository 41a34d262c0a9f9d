"""The app shell: views, keys, help, palette, themes, read-only mode, logging, options."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

import pytest
from rich.color import Color as RichColor
from rich.color import ColorSystem
from textual.app import SystemCommand
from textual.css.stylesheet import Stylesheet
from tui_fakes import FakeCapture, NotifySpy, batch

from eagle_tui.core.errors import ConfigError
from eagle_tui.core.logsetup import log_to_file
from eagle_tui.core.urls import ServerURL
from eagle_tui.tui.app import EagleApp
from eagle_tui.tui.dashboard import (
    TuiConfig,
    add_arguments,
    options_from,
    read_config,
    server_targets,
)
from eagle_tui.tui.options import DashboardOptions
from eagle_tui.tui.screens.help import HelpScreen
from eagle_tui.tui.sources import Sources
from eagle_tui.tui.themes import SHIPPED_THEMES_DIR, load_themes, theme_from_mapping


def quiet_app(**options: object) -> EagleApp:
    """The app with no servers and a fake capture (nothing touches the network)."""
    return EagleApp(DashboardOptions(**options), sources=Sources(capture=FakeCapture()))  # type: ignore[arg-type]


async def test_number_keys_switch_views() -> None:
    app = quiet_app()
    async with app.run_test(size=(80, 24)) as pilot:
        assert app.current_mode == "server"
        for key, view in (("2", "capture"), ("3", "streams"), ("4", "inspect"), ("1", "server")):
            await pilot.press(key)
            await pilot.pause()
            assert app.current_mode == view


@pytest.mark.parametrize(("view", "parses"), [("server", 2), ("inspect", 2), ("fleet", 4)])
async def test_the_app_is_composed_in_its_start_view(
    view: str, parses: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Composed in the start view, not in Textual's blank screen switched away from: one
    stylesheet parse less at start-up (the Fleet view is fed by the Server view's, so it
    starts there and moves on)."""
    seen: list[int] = []
    reparse = Stylesheet.reparse

    def counted(stylesheet: Stylesheet) -> None:
        seen.append(1)
        reparse(stylesheet)

    monkeypatch.setattr(Stylesheet, "reparse", counted)
    app = quiet_app(start_view=view)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert app.current_mode == view
        assert len(seen) == parses


async def test_question_mark_and_f1_toggle_help_for_the_view() -> None:
    app = quiet_app(start_view="capture")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("f1")
        await pilot.pause()
        assert not isinstance(app.screen, HelpScreen)
        await pilot.press("f1")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        await pilot.pause()
        assert app.current_mode == "capture" and not isinstance(app.screen, HelpScreen)


async def test_palette_lists_app_and_view_commands() -> None:
    app = quiet_app(start_view="capture")
    async with app.run_test(size=(80, 24)):
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert {"View: Server", "View: Capture", "View: Streams", "View: Inspect"} <= set(titles)
        assert "Capture: new batch" in titles and "Theme" in titles


async def test_readonly_hides_mutating_actions() -> None:
    app = EagleApp(
        DashboardOptions(readonly=True, start_view="capture"),
        sources=Sources(capture=FakeCapture([batch()])),
    )
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        screen = app.screen
        for action in ("new_batch", "pause_resume", "stop_batch", "watch"):
            assert screen.check_action(action, ()) is False
        titles = [c.title for c in app.get_system_commands(screen) if isinstance(c, SystemCommand)]
        assert not any(t.startswith("Capture:") for t in titles)
        await pilot.press("n")
        await pilot.pause()
        assert app.screen is screen  # nothing opened


async def test_themes_load_and_switch_at_run_time() -> None:
    app = quiet_app(theme="eagle-light")
    async with app.run_test(size=(80, 24)) as pilot:
        assert app.theme == "eagle-light"
        assert {"eagle-dark", "eagle-light", "ansi-dark", "textual-dark"} <= set(
            app.available_themes
        )
        app.theme = "eagle-dark"
        await pilot.pause()
        assert app.theme == "eagle-dark"


async def test_unknown_theme_falls_back_and_says_so() -> None:
    app = quiet_app(theme="no-such-theme")
    toasts = NotifySpy(app)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert app.theme == "eagle-dark"
        assert any("no-such-theme" in n.message for n in toasts)


def test_shipped_themes_keep_surfaces_apart_in_256_colours() -> None:
    loaded = load_themes([SHIPPED_THEMES_DIR])
    assert not loaded.problems
    names = {t.name for t in loaded.themes}
    assert {"eagle-dark", "eagle-light"} <= names
    for theme in loaded.themes:
        surfaces = [theme.background, theme.surface, theme.panel]
        quantised = {RichColor.parse(c).downgrade(ColorSystem.EIGHT_BIT).number for c in surfaces}
        assert len(quantised) == 3, f"{theme.name}: surfaces collapse in 256 colours"


def test_bad_theme_files_are_skipped_with_a_reason(tmp_path: Path) -> None:
    (tmp_path / "bad.toml").write_text('name = "bad"\nprimary = "not-a-colour"\n')
    (tmp_path / "typo.toml").write_text('name = "typo"\nprimray = "#ffffff"\n')
    (tmp_path / "broken.toml").write_text("name = \n")
    loaded = load_themes([tmp_path])
    assert not loaded.themes and len(loaded.problems) == 3
    with pytest.raises(ValueError):
        theme_from_mapping({"name": "x"}, default_name="x")


def test_logging_goes_to_a_file_and_httpx_is_quiet(tmp_path: Path) -> None:
    path = log_to_file(tmp_path / "logs" / "tui.log", "DEBUG")
    logging.getLogger("tui.test").info("hello file")
    for handler in logging.getLogger().handlers:
        handler.flush()
    assert "hello file" in path.read_text()
    assert logging.getLogger("httpx").level == logging.WARNING
    root = logging.getLogger()
    assert not [h for h in root.handlers if type(h) is logging.StreamHandler]
    for handler in list(root.handlers):
        if getattr(handler, "baseFilename", "") == str(path):
            root.removeHandler(handler)
            handler.close()


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(argv)


def test_options_precedence_cli_env_file_defaults() -> None:
    config = TuiConfig(theme="nord", readonly=True, mouse=False, view="inspect")
    options = options_from(parse(), config, {})
    assert (options.theme, options.readonly, options.mouse, options.start_view) == (
        "nord",
        True,
        False,
        "inspect",
    )
    options = options_from(parse(), config, {"EAGLE_TUI_THEME": "gruvbox"})
    assert options.theme == "gruvbox"
    options = options_from(
        parse("--theme", "eagle-light", "--no-mouse", "--view", "capture"),
        TuiConfig(),
        {"EAGLE_TUI_THEME": "gruvbox"},
    )
    assert (options.theme, options.mouse, options.start_view) == ("eagle-light", False, "capture")
    assert options_from(parse(), TuiConfig(), {}) == DashboardOptions()


def test_servers_pair_with_their_logs() -> None:
    urls = [ServerURL.parse("http://a:1"), ServerURL.parse("http://b:2")]
    targets = server_targets(urls, [Path("a.log")])
    assert targets[0].log_file == Path("a.log") and targets[1].log_file is None
    with pytest.raises(ConfigError):
        server_targets(urls[:1], [Path("a.log"), Path("b.log")])


def test_config_file_errors_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    assert read_config(path) == TuiConfig()
    path.write_text("[tui]\ntheme = 'eagle-light'\n")
    assert read_config(path) == TuiConfig(theme="eagle-light")
    path.write_text("[tui\n")
    with pytest.raises(ConfigError, match=r"config\.toml"):
        read_config(path)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('readonly = "false"', r"\[tui\] readonly: Expected `bool \| null`, got `str`; it takes "
                               "true or false, without quotes"),
        ("mouse = 0", r"\[tui\] mouse: Expected `bool \| null`, got `int`"),
        ("theme = 3", r"\[tui\] theme: Expected `str \| null`, got `int`; it takes a theme"),
        ("tokenizer = ['a']", r"\[tui\] tokenizer: Expected `str \| null`, got `array`"),
        ('view = "nowhere"', r"\[tui\] view: unknown view 'nowhere'; it takes one of server, "),
        ('refresh = "2"', r"\[tui\] refresh: Expected `float \| null`, got `str`; it takes "),
        ("refresh = 0", r"\[tui\] refresh: 0 is out of range; it takes seconds between redraws"),
    ],
)
def test_a_config_value_of_the_wrong_type_is_an_error_naming_file_and_key(
    tmp_path: Path, line: str, message: str
) -> None:
    path = tmp_path / "config.toml"
    path.write_text(f"[tui]\n{line}\nfuture_key = 1\n")
    with pytest.raises(ConfigError, match=message) as caught:
        read_config(path)
    assert str(caught.value).startswith(f"config file {path}: ")


def test_refresh_from_the_command_line_then_the_config_file(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text("[tui]\nrefresh = 3\n")
    assert options_from(parse(), read_config(path), {}).refresh_s == 3.0
    assert options_from(parse("--refresh", "0.5"), read_config(path), {}).refresh_s == 0.5
    assert options_from(parse(), TuiConfig(), {}).refresh_s == 1.0
    with pytest.raises(SystemExit):
        parse("--refresh", "0")


def test_true_and_false_and_unknown_keys_read_as_before(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text("[tui]\nreadonly = false\nmouse = true\nfuture_key = 'x'\n")
    assert read_config(path) == TuiConfig(readonly=False, mouse=True)
    assert not options_from(parse(), read_config(path), {}).readonly


PAINT_PATH_PROBE = """
import sys
from eagle_tui.tui.app import EagleApp
from eagle_tui.tui.options import DashboardOptions
from eagle_tui.tui.screens.server import ServerScreen
EagleApp(DashboardOptions())
heavy = ("transformers", "pyarrow", "eagle_tui.core.capture.engine")
print(",".join(m for m in heavy if m in sys.modules))
"""


@pytest.mark.slow
def test_first_paint_path_imports_nothing_heavy() -> None:
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", PAINT_PATH_PROBE],
        capture_output=True,
        text=True,
        cwd=root,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "", f"imported before the first paint: {done.stdout}"
