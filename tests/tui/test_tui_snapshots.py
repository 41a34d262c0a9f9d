"""SVG snapshots of each view at 80×24 and 120×40 (Streams at 200×60 too), in eagle-dark and
eagle-light.

Deterministic on purpose: fake sources with fixed figures (no clock reaches the screen),
no cursor blink, toasts cleared, relative paths. A changed rendering fails the test; after
looking at the new pictures, regenerate them with ``EAGLE_UPDATE_SNAPSHOTS=1``. Snapshots
are made with one Textual version (8.2.8): a Textual upgrade may need a deliberate refresh.
"""

from __future__ import annotations

import difflib
import html
import os
import re
import tempfile
from pathlib import Path

import pytest
from textual.pilot import Pilot
from tui_fakes import FakeCapture, FakeServerFeed, batch, health, progress, wait_for
from tui_shards import make_row, synthetic_rows, write_shards

from eagle_tui.core import kimi
from eagle_tui.core.capture.events import CaptureEvent, DeltaEvent, RequestEvent
from eagle_tui.core.health.snapshot import Flag
from eagle_tui.core.tokenizer import bundled_tokenizer_path, load_tokenizer
from eagle_tui.core.urls import ServerURL
from eagle_tui.tui.app import EagleApp
from eagle_tui.tui.options import DashboardOptions, ServerTarget
from eagle_tui.tui.screens.capture import CaptureScreen
from eagle_tui.tui.screens.inspect import InspectScreen
from eagle_tui.tui.screens.sample import SampleScreen
from eagle_tui.tui.screens.server import ServerScreen
from eagle_tui.tui.screens.streams import StreamsScreen
from eagle_tui.tui.sources import Sources
from eagle_tui.tui.sources.server import LogBatch
from eagle_tui.tui.sources.tokenizers import TokenizerCache
from eagle_tui.tui.widgets.server_card import ServerCard
from eagle_tui.tui.widgets.token_view import TokenView

SNAPSHOTS = Path(__file__).resolve().parent / "snapshots"
UPDATE = os.environ.get("EAGLE_UPDATE_SNAPSHOTS") == "1"
LOG_LINES = (
    "[2026-01-02 03:04:05] server_args=ServerArgs(model_path='/models/Kimi-K2.5', tp_size=8)",
    "[2026-01-02 03:04:09 TP0] Load weight begin. avail mem=139.12 GB",
    "[2026-01-02 03:04:10 TP3] WARNING: [INST] literal text, a [/] b, [bold not bold",
    "[2026-01-02 03:04:11 TP5] ERROR: RuntimeError: NCCL timeout (shown as an error line)",
)
SVG_TEXT = re.compile(r'<text class="[^"]*" x="([\d.]+)" y="([\d.]+)"[^>]*>(.*?)</text>')
SLOW = Flag("slow_startup", "elapsed 2m10s > expected window 2m00s (3 earlier starts)")


async def settled_screenshot(app: EagleApp, pilot: Pilot[None]) -> str:
    """The screen once three renderings 100 ms apart agree. On a loaded CI machine a thread
    worker can wait longer than one short pause to be scheduled, so two equal renderings
    50 ms apart were once taken mid-way (the Inspect view, twice)."""
    svg, agreed = "", 0
    for _ in range(100):
        await pilot.pause(0.1)
        again = app.export_screenshot(title="eagle-tui")
        agreed = agreed + 1 if again == svg else 0
        if agreed == 2:
            return svg
        svg = again
    return svg


def screen_text(svg: str) -> list[str]:
    """The characters of an exported screenshot, one string per terminal row."""
    rows: dict[float, list[tuple[float, str]]] = {}
    for match in SVG_TEXT.finditer(svg):
        x, y, text = float(match[1]), float(match[2]), html.unescape(match[3])
        rows.setdefault(y, []).append((x, text))
    return ["".join(text for _, text in sorted(cells)).replace("\xa0", " ").rstrip()
            for _, cells in sorted(rows.items())]


def what_changed(expected: str, seen: str) -> str:
    """The rows whose text changed, or a note that only colours or styles did (CI keeps
    only the log, so the log has to say what moved)."""
    diff = difflib.unified_diff(screen_text(expected), screen_text(seen), "expected", "seen",
                                n=0, lineterm="")
    text = "\n".join(diff)
    return text or "the text is the same; only colours or styles differ"


async def check(app: EagleApp, pilot: Pilot[None], name: str) -> None:
    """Compare the app's screen with ``snapshots/<name>.svg`` (write it when updating)."""
    app.clear_notifications()
    svg = await settled_screenshot(app, pilot)
    path = SNAPSHOTS / f"{name}.svg"
    if UPDATE or not path.exists():
        SNAPSHOTS.mkdir(exist_ok=True)
        path.write_text(svg, encoding="utf-8")
        if not UPDATE:
            pytest.fail(f"new snapshot {path.name} written; look at it, then run again")
    expected = path.read_text(encoding="utf-8")
    if svg != expected:
        seen = Path(tempfile.gettempdir()) / "eagle-tui-snapshots" / f"{name}.svg"
        seen.parent.mkdir(exist_ok=True)
        seen.write_text(svg, encoding="utf-8")
        pytest.fail(f"{name} changed (this rendering: {seen}); look at it, and if it is right "
                    f"rerun with EAGLE_UPDATE_SNAPSHOTS=1\n{what_changed(expected, svg)}")


def server_app(theme: str) -> tuple[EagleApp, FakeServerFeed]:
    target = ServerTarget(ServerURL.parse("http://127.0.0.1:30000"), name="kimi-k2.5")
    items = [health(seq=i, elapsed_s=130.0, flags=[SLOW]) for i in range(3)]
    feed = FakeServerFeed(target, [*items, LogBatch(LOG_LINES, partial="Loading 45%|####")])
    app = EagleApp(
        DashboardOptions(theme=theme, servers=(target,)),
        sources=Sources(servers=(feed,), capture=FakeCapture()),
    )
    return app, feed


@pytest.mark.parametrize(("size", "theme"), [((80, 24), "eagle-dark"), ((120, 40), "eagle-light")])
async def test_server_view(size: tuple[int, int], theme: str, no_blink: None) -> None:
    app, _ = server_app(theme)
    async with app.run_test(size=size) as pilot:
        screen = app.screen
        assert isinstance(screen, ServerScreen)
        await wait_for(pilot, lambda: len(screen.buffers[0]) == len(LOG_LINES), what="log")
        await wait_for(pilot, lambda: screen.query_one(ServerCard).snapshot is not None)
        await pilot.pause()
        await check(app, pilot, f"server_{size[0]}x{size[1]}_{theme}")


@pytest.mark.parametrize(("size", "theme"), [((120, 40), "eagle-dark"), ((80, 24), "eagle-light")])
async def test_capture_view(size: tuple[int, int], theme: str, no_blink: None) -> None:
    control = FakeCapture(
        [
            batch(
                "b1-kimi-en", "finished", progress=progress(97, 100, state="finished", in_flight=0)
            ),
            batch("b2-kimi-zh", "running"),
        ]
    )
    # The slowest --refresh a user can ask for: the view takes its snapshots when the test
    # says (each one adds a point to the rate sparklines, so the picture never depends on
    # how long the machine took).
    app = EagleApp(
        DashboardOptions(theme=theme, start_view="capture", refresh_s=60.0),
        sources=Sources(capture=control),
    )
    async with app.run_test(size=size) as pilot:
        await pilot.press("down")
        screen = app.screen
        assert isinstance(screen, CaptureScreen)
        # The sparklines draw one point flat and two equal points full: take a second one.
        await wait_for(pilot, lambda: len(screen.histories["b2-kimi-zh"].samples_per_s) == 1,
                       what="the first rate point")
        screen.refresh_batches()
        assert len(screen.histories["b2-kimi-zh"].samples_per_s) == 2
        await pilot.pause()
        await check(app, pilot, f"capture_{size[0]}x{size[1]}_{theme}")


def shard_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``batch/`` under a temporary working directory (so the shown path never changes)."""
    tokenizer = load_tokenizer(bundled_tokenizer_path())
    prompt = tokenizer.render([{"role": "user", "content": "What is [INST]? Explain a [/] b."}])
    reasoning = tokenizer.hf.encode("The user asks about [bold markup.", add_special_tokens=False)
    answer = tokenizer.hf.encode("It is literal text.", add_special_tokens=False)
    call = tokenizer.hf.encode("functions.lookup:0", add_special_tokens=False)
    output = [
        *reasoning,
        kimi.THINK_END,
        *answer,
        kimi.TOOL_CALLS_SECTION_BEGIN,
        kimi.TOOL_CALL_BEGIN,
        *call,
        kimi.TOOL_CALL_END,
        kimi.TOOL_CALLS_SECTION_END,
        kimi.IM_END,
    ]
    rows = [make_row(0, prompt, output, ("tool_call",)), *synthetic_rows(60)[1:]]
    monkeypatch.chdir(tmp_path)
    write_shards(tmp_path / "batch", rows)
    return Path("batch")


def inspect_reading(app: EagleApp) -> bool:
    """Whether the Inspect view still reads shards in a thread (its workers' groups)."""
    return any(worker.group.startswith("inspect-") and not worker.is_finished
               for worker in app.workers)


def inspect_app(directory: Path, theme: str) -> EagleApp:
    return EagleApp(
        DashboardOptions(theme=theme, start_view="inspect", shard_dirs=(directory,)),
        sources=Sources(
            capture=FakeCapture(), tokenizers=TokenizerCache(), shard_dirs=(str(directory),)
        ),
    )


@pytest.mark.parametrize(("size", "theme"), [((120, 40), "eagle-light"), ((80, 24), "eagle-dark")])
async def test_inspect_view(
    size: tuple[int, int],
    theme: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    no_blink: None,
) -> None:
    app = inspect_app(shard_dir(tmp_path, monkeypatch), theme)
    async with app.run_test(size=size) as pilot:
        screen = app.screen
        assert isinstance(screen, InspectScreen)
        await wait_for(pilot, lambda: screen.page is not None, what="first page")
        await wait_for(pilot, lambda: not inspect_reading(app), what="shard reads done")
        await check(app, pilot, f"inspect_{size[0]}x{size[1]}_{theme}")


@pytest.mark.parametrize(("size", "theme"), [((80, 24), "eagle-dark"), ((120, 40), "eagle-light")])
async def test_sample_screen(
    size: tuple[int, int],
    theme: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    no_blink: None,
) -> None:
    app = inspect_app(shard_dir(tmp_path, monkeypatch), theme)
    async with app.run_test(size=size) as pilot:
        screen = app.screen
        assert isinstance(screen, InspectScreen)
        await wait_for(pilot, lambda: screen.page is not None, what="first page")
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, SampleScreen), what="sample")
        view = app.screen.query_one(TokenView)
        await wait_for(pilot, lambda: view.document.decoded, 60, "decoded")
        await pilot.pause()
        await check(app, pilot, f"sample_{size[0]}x{size[1]}_{theme}")


def stream_events() -> list[CaptureEvent]:
    tokenizer = load_tokenizer(bundled_tokenizer_path())

    def ids(text: str) -> tuple[int, ...]:
        return tuple(tokenizer.hf.encode(text, add_special_tokens=False))

    events: list[CaptureEvent] = []
    for n, (think, answer) in enumerate(
        [("Check [INST] first.", "Done [/] ok."), ("Need a tool [bold here.", "")]
    ):
        sid = f"p{n}"
        events.append(RequestEvent(kind="sent", sample_id=sid, at=0.0, rid=f"cap-{n:04d}",
                                   watched=True))
        events.append(delta(sid, (*ids(think), kimi.THINK_END)))
        if answer:
            events.append(delta(sid, (*ids(answer), kimi.IM_END)))
            events.append(RequestEvent(kind="finished", sample_id=sid, at=0.0))
        else:
            call = (
                kimi.TOOL_CALLS_SECTION_BEGIN,
                kimi.TOOL_CALL_BEGIN,
                *ids("f:0"),
                kimi.TOOL_CALL_ARGUMENT_BEGIN,
                *ids('{"q": 1}'),
            )
            events.append(delta(sid, call))
    return events


def delta(sample_id: str, new_ids: tuple[int, ...]) -> DeltaEvent:
    return DeltaEvent(sample_id=sample_id, rid=None, new_ids=new_ids, total=0, at=0.0)


@pytest.mark.parametrize(("size", "theme"), [((120, 40), "eagle-dark"), ((80, 24), "ansi-dark"),
                                           ((200, 60), "eagle-dark")])
async def test_streams_view(size: tuple[int, int], theme: str, no_blink: None) -> None:
    control = FakeCapture([batch("b1", "running", tokenizer=bundled_tokenizer_path())])
    app = EagleApp(
        DashboardOptions(theme=theme, start_view="streams"),
        sources=Sources(capture=control, tokenizers=TokenizerCache()),
    )
    app.watching = "b1"
    async with app.run_test(size=size) as pilot:
        screen = app.screen
        assert isinstance(screen, StreamsScreen)
        await wait_for(pilot, lambda: bool(screen._tokenizer_name), 60, "tokenizer")
        control.add_events("b1", stream_events())
        await wait_for(pilot, lambda: len(screen.boxes) == 2, what="streams")
        await pilot.pause()
        await check(app, pilot, f"streams_{size[0]}x{size[1]}_{theme}")
