"""Screenshots of every view from the real app, driven through ``eagle-tui demo``'s setup.

Starts the demo (simulated server, capture batch, dashboard) headless and saves, per view,
an SVG (and a PNG when ``cairosvg`` is installed) for the README:

    .venv/bin/python tests/tui/tui_screenshots.py OUT_DIR [--size 120x40]
        [--theme eagle-dark]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # support.waiting

from support.waiting import pilot_wait  # noqa: E402

from eagle_tui.core.health.phase import Phase  # noqa: E402
from eagle_tui.tui.app import EagleApp  # noqa: E402
from eagle_tui.tui.demo import DemoApp, finish_demo, prepare_demo  # noqa: E402
from eagle_tui.tui.screens.sample import SampleScreen  # noqa: E402
from eagle_tui.tui.widgets.server_card import ServerCard  # noqa: E402


def save(app: EagleApp, out: Path, name: str) -> None:
    app.clear_notifications()
    app.screen.refresh()
    svg = app.export_screenshot(title="eagle-tui")
    (out / f"{name}.svg").write_text(svg, encoding="utf-8")
    try:
        import cairosvg
    except ImportError:
        return
    fixed = svg.replace('"Fira Code"', '"DejaVu Sans Mono"').replace(
        "Fira Code, monospace", '"DejaVu Sans Mono", monospace'
    )
    cairosvg.svg2png(
        bytestring=fixed.encode(), write_to=str(out / f"{name}.png"), output_width=1400
    )


def card_phase(app: EagleApp) -> Phase | None:
    cards = list(app.screen.query(ServerCard))
    snapshot = cards[0].snapshot if cards else None
    return snapshot.phase if snapshot is not None else None


async def shoot(out: Path, size: tuple[int, int], theme: str) -> None:
    args = argparse.Namespace(
        time_scale=1.0,
        prompts=400,
        tokens_per_s=40.0,
        theme=theme,
        no_mouse=False,
        keep=False,
        log_level="INFO",
        refresh=None,
        rank_hang=None,
    )
    demo = prepare_demo(args)
    try:
        app = DemoApp(demo, args)
        async with app.run_test(size=size) as pilot:

            def flagged() -> bool:
                card = app.screen.query_one(ServerCard)
                return card.snapshot is not None and bool(card.snapshot.flags)

            await pilot_wait(pilot, flagged, 120)
            await pilot.pause(1.0)
            save(app, out, "server-starting")
            await pilot_wait(pilot, lambda: card_phase(app) == Phase.READY, 180)
            await pilot.pause(12.0)
            save(app, out, "server-ready")
            await pilot.press("2")
            await pilot.pause(1.0)
            save(app, out, "capture")
            await pilot.press("3")
            await pilot.pause(3.0)
            save(app, out, "streams")
            await pilot.press("4")
            await pilot.pause(0.5)
            await pilot.press("r")
            await pilot_wait(
                pilot,
                lambda: getattr(app.screen, "page", None) is not None and app.screen.page.rows,
                60,
            )  # type: ignore[attr-defined]
            save(app, out, "inspect")
            await pilot.press("enter")
            await pilot_wait(pilot, lambda: isinstance(app.screen, SampleScreen), 30)
            await pilot.pause(4.0)
            save(app, out, "sample")
    finally:
        finish_demo(demo)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--size", default="120x40")
    parser.add_argument("--theme", default="eagle-dark")
    args = parser.parse_args()
    width, height = (int(n) for n in args.size.split("x"))
    args.out.mkdir(parents=True, exist_ok=True)
    asyncio.run(shoot(args.out, (width, height), args.theme))
    print(f"screenshots written to {args.out}")


if __name__ == "__main__":
    main()
