"""The sample view scrolls by keys: j/k three lines a step, G to the end, g back to the top
(the keys the Streams view shares, declared once in ``screens.base.scroll_keys``)."""

from __future__ import annotations

from pathlib import Path

from textual.containers import VerticalScroll
from tui_fakes import FakeCapture, wait_for
from tui_shards import make_row, write_shards

from eagle_tui.core import kimi
from eagle_tui.core.tokenizer import bundled_tokenizer_path, load_tokenizer
from eagle_tui.tui.app import EagleApp
from eagle_tui.tui.options import DashboardOptions
from eagle_tui.tui.screens.sample import SampleScreen
from eagle_tui.tui.sources import Sources
from eagle_tui.tui.sources.tokenizers import TokenizerCache


async def test_the_sample_view_scrolls_by_keys(tmp_path: Path) -> None:
    tokenizer = load_tokenizer(bundled_tokenizer_path())
    prompt = tokenizer.render([{"role": "user", "content": "a long answer, please"}])
    line = tokenizer.hf.encode("one more line of the answer\n", add_special_tokens=False)
    directory = write_shards(tmp_path / "batch",
                             [make_row(0, prompt, [*line * 200, kimi.IM_END])])
    app = EagleApp(DashboardOptions(start_view="inspect", shard_dirs=(directory,)),
                   sources=Sources(capture=FakeCapture(), tokenizers=TokenizerCache(),
                                   shard_dirs=(str(directory),)))
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: getattr(app.screen, "page", None) is not None,
                       what="the Inspect view's first page")
        await pilot.press("enter")  # opens the sample under the cursor
        await wait_for(pilot, lambda: isinstance(sample := app.screen, SampleScreen)
                       and sample.tokens.document.decoded, 60.0, "the sample decoded")
        body = app.screen.query_one("#sample-body", VerticalScroll)
        await wait_for(pilot, lambda: body.max_scroll_y > 10, what="a body taller than 30 rows")
        await pilot.press("j", "j")
        await wait_for(pilot, lambda: body.scroll_y == 6, what="two steps down")
        await pilot.press("k")
        await wait_for(pilot, lambda: body.scroll_y == 3, what="one step up")
        await pilot.press("G")
        await wait_for(pilot, lambda: body.scroll_y == body.max_scroll_y, what="the end")
        await pilot.press("g")
        await wait_for(pilot, lambda: body.scroll_y == 0, what="the top")
