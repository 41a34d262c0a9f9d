"""The dashboard as a person meets it: ``eagle-tui`` on a real pseudo-terminal, driven by the
bytes a terminal sends (keys, bursts of keys in one write, bracketed paste, SGR mouse
clicks) and read back from the screen a terminal emulator (pyte) draws
(``tests/support/terminal.py``). Servers are simulated SGLang servers in processes of their
own on ports from the OS; batches are real detached workers writing real shards.

Issue 20: ``]``/``[``, a click on a card and the palette select a server (item 1); a burst of
editing keys in every text field keeps its order (2); Inspect's ``/`` finds a row on another
page (8); the copy that reaches the terminal keeps the boundary tokens (12); Esc in the
New-batch form leaves the field (13); a finished batch's detail is a note with flag kinds
(14); starting and ``i`` follow the selection (17); and the keys each help screen lists.
Low items: the New-batch form takes a name, Streams follows a batch that was running
before the dashboard started, and a foreground capture stopping after Ctrl-C shows no ETA.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.terminal import PtyTerminal
from support.waiting import poll_until, wait_until
from test_tui_capture_view import prompts_file
from tui_shards import make_row, synthetic_rows, write_shards

from eagle_tui.core import kimi
from eagle_tui.core.batches.control_client import BatchClient
from eagle_tui.core.batches.detach import launch_detached
from eagle_tui.core.batches.registry import Registry
from eagle_tui.core.sim.launcher import SimProcess
from eagle_tui.core.tokenizer import bundled_tokenizer_path, load_tokenizer
from eagle_tui.tui.sources.batches import shard_flag_counts
from eagle_tui.tui.sources.capture import BatchRequest

pytestmark = pytest.mark.slow

TOKENIZER = str(bundled_tokenizer_path())
FAST_SIM_ARGS = ("--time-scale", "0", "--tokens-per-s", "0", "--ttft", "0")


@pytest.fixture
def two_sims(tmp_path: Path) -> Iterator[tuple[SimProcess, SimProcess]]:
    with (SimProcess(FAST_SIM_ARGS, log_path=tmp_path / "alpha.log") as alpha,
          SimProcess(FAST_SIM_ARGS, log_path=tmp_path / "beta.log") as beta):
        alpha.wait_ready(90)
        beta.wait_ready(90)
        yield alpha, beta


def mark_log(sim: SimProcess, name: str) -> None:
    """Lines only this server's log has (three: a card shows only the last)."""
    with sim.log_path.open("a") as log:
        log.write("".join(f"{name} marker line {n}\n" for n in range(3)))


def test_server_view_keys_clicks_palette_and_log_search(
    tmp_path: Path, two_sims: tuple[SimProcess, SimProcess]
) -> None:
    alpha, beta = two_sims
    mark_log(alpha, "alpha")
    mark_log(beta, "beta")
    args = ["--url", alpha.url, "--log", str(alpha.log_path),
            "--url", beta.url, "--log", str(beta.log_path), "--refresh", "0.3"]
    with PtyTerminal(args, cols=140, rows=90) as term:
        term.wait_for("alpha marker line 0")  # the first server's log
        assert "beta marker line 0" not in term.text()
        term.press("right_square_bracket")  # the byte "]"
        term.wait_for("beta marker line 0")
        term.wait_gone("alpha marker line 0")
        term.press("left_square_bracket")
        term.wait_for("alpha marker line 0")
        term.click_text(f"127.0.0.1:{beta.port}")  # a click on the second card
        term.wait_for("beta marker line 0")
        term.press("ctrl+p")
        term.wait_for("Search for commands")
        term.burst("next server")
        term.wait_for("Server: next server")
        term.press("down")  # the best match highlighted (Enter alone only highlights it)
        term.press("enter")
        term.wait_gone("Search for commands")
        term.wait_for("alpha marker line 0")  # next after the second: the first again
        term.burst("slash", "marker", "enter")  # "/" opens the box at once: the rest lands there
        term.wait_until(lambda: re.search(r"\b\d+/\d+ lines", term.text()) is not None,
                        "the log searched for 'marker' (matching lines counted)")
        term.wait_gone("Uvicorn running on")  # matching lines only
        assert "alpha marker line 0" in term.text()
        help_lists(term, "Server", ["]  Next server", "[  Prev server", "/  Search",
                                    "e  Next error", "f  Follow", "h  Quiet"])


def help_lists(term: PtyTerminal, view: str, lines: list[str]) -> None:
    """``?`` opens the view's help, which lists ``lines`` (key, description), read while
    the mouse wheel scrolls it; F1 closes it."""
    term.press("question_mark")
    term.wait_for(f"{view} — help")
    seen: set[str] = set()

    def missing() -> list[str]:
        seen.update(" ".join(row.replace("│", " ").split()) for row in term.lines())
        return [line for line in lines if not any(" ".join(line.split()) in row for row in seen)]

    while missing():
        before = term.text()
        term.wheel(term.screen.columns // 2, term.screen.lines // 2)
        scrolled = poll_until(lambda b=before: term.text() != b, 10)  # type: ignore[misc]
        # the look after the wait counts too: a loaded machine may paint just after it
        assert scrolled or not missing(), f"not in the help: {missing()}\n{term.text()}"
    term.press("f1")
    term.wait_gone(f"{view} — help")


def finished_batch(sim: SimProcess, prompts: Path, out: Path) -> str:
    """A batch run to the end by a detached worker, as ``capture --detach`` runs it."""
    request = BatchRequest(prompts, out, (sim.url,), bundled_tokenizer_path(),
                           concurrency=4, max_new_tokens=24)
    launched = asyncio.run(asyncio.to_thread(launch_detached, request.to_config()))
    batch_id = str(launched.record.id)
    wait_until(lambda: Registry().load(batch_id).final_state is not None, 120,
               f"batch {batch_id} to finish")
    assert Registry().load(batch_id).final_state == "done"
    return batch_id


def test_capture_new_batch_and_inspect_follow_the_selection(
    tmp_path: Path, sim_server: SimProcess
) -> None:
    prompts = prompts_file(tmp_path / "p.jsonl", 12)
    first = finished_batch(sim_server, prompts, tmp_path / "first-out")
    second = finished_batch(sim_server, prompts, tmp_path / "second-out")
    flags = shard_flag_counts(tmp_path / "second-out")
    args = ["--view", "capture", "--url", sim_server.url, "--tokenizer", TOKENIZER,
            "--refresh", "0.3"]
    with PtyTerminal(args, cols=140, rows=90, cwd=tmp_path) as term:
        term.wait_for(second)
        term.wait_for(f"{first} (first-out) · done")  # the detail: the first row
        term.click_text(second)  # a click on the second row selects it
        term.wait_for(f"{second} (second-out) · done")
        screen = term.text()
        assert "error:" not in screen and "known while" not in screen
        if flags:  # item 14: the kinds come from the shards
            kind, count = max(flags.items(), key=lambda item: item[1])
            assert f"{kind} {count}" in screen, screen
        help_lists(term, "Capture", ["n  New", "i  Inspect", "o  Sort"])
        term.press("i")  # item 17: the selection opens in Inspect
        term.wait_for(str(tmp_path / "second-out"))
        term.wait_for("12 rows in")
        term.press("2")
        term.wait_for(f"{second} (second-out) · done")
        new_batch_form(term, prompts, tmp_path / "third-out", sim_server.url)
        term.wait_for("third-out")  # item 17: the detail follows the started batch
        term.wait_until(lambda: "third-out" in detail_title(term), "the new batch selected")
        assert "(pty-night)" in detail_title(term)  # the name typed in the form


def detail_title(term: PtyTerminal) -> str:
    """The Capture detail's first line (``id · state · out_dir``)."""
    return next((row for row in term.lines() if " · " in row and "-out" in row), "")


def new_batch_form(term: PtyTerminal, prompts: Path, out: Path, server: str) -> None:
    """Fill the New-batch form with pastes and bursts, check Esc keeps it, start it."""
    term.press("n")
    term.wait_for("New capture batch")
    term.paste(str(prompts))  # the prompts field has the keys first
    term.burst("tab", str(out), "tab", "ctrl+u", server, "tab")
    term.wait_for(out.name)  # (a long path scrolls in its field)
    term.wait_until(lambda: any(row.strip(" │") == server for row in term.lines()),
                    "the server typed over the default (ctrl+u in the burst)")
    term.burst("tab", "tab")  # to max new tokens ("4096")
    term.burst("backspace", "backspace", "backspace", "backspace", "2", "0")
    term.wait_until(lambda: any(re.match(r"8 +20 +2000", row.strip(" │"))
                                for row in term.lines()),
                    "max new tokens 20 (the burst in order), beside concurrency 8")
    term.burst("tab", "tab", "pty-night")  # past rows per shard, to the batch's name
    term.wait_for("pty-night")
    term.press("escape")  # item 13: leaves the field, the form stays
    term.wait_for("no field has the keys")
    term.press("q")  # a key outside any field: typed nowhere, quits nothing
    term.wait_until(lambda: "New capture batch" in term.text() and out.name in term.text(),
                    "the form still open with its values")
    term.press("ctrl+s")
    term.wait_gone("New capture batch")


def test_inspect_search_bursts_and_the_copy_that_reaches_the_terminal(tmp_path: Path) -> None:
    directory = write_shards(tmp_path / "big", synthetic_rows(350))
    tokenizer = load_tokenizer(bundled_tokenizer_path())
    prompt = tokenizer.render([{"role": "user", "content": "Why?"}])
    words = tokenizer.hf.encode("because", add_special_tokens=False)
    small = write_shards(tmp_path / "small",
                         [make_row(0, prompt, [*words, kimi.THINK_END, *words, kimi.IM_END])])
    args = ["--view", "inspect", "--shards", str(directory), "--tokenizer", TOKENIZER]
    with PtyTerminal(args, cols=140, rows=90, cwd=tmp_path) as term:
        term.wait_for("page 1/4 of 350 matching")
        term.burst("slash", "s00250", "enter")  # item 8: a row three pages on
        term.wait_for("page 3/4 of 350 matching")
        help_lists(term, "Inspect", ["o  Open path", "n  Next page", "/  Search"])
        term.burst("o", "ctrl+u", str(small), "enter")  # the path field, in one write
        term.wait_for("1 rows in 1 shard")
        term.press("enter")
        term.wait_for("decoded with")  # the tokenizer has loaded (raw ids until then)
        term.press("y")  # item 12: what reaches the terminal's clipboard
        term.wait_until(lambda: bool(term.clipboard()), "an OSC 52 copy")
        copied = term.clipboard()[-1]
        assert f"⟦</think> {kimi.THINK_END}⟧" in copied and f"⟦<|im_end|> {kimi.IM_END}⟧" in copied
        term.press("e")
        exported = tmp_path / "eagle-sample-s00000.json"
        term.wait_until(exported.exists, "the export")
        assert json.loads(exported.read_text())["decoded"]["output"] == copied


def test_streams_follows_a_batch_that_was_running_before_the_dashboard(
    tmp_path: Path, start_sim: Callable[..., SimProcess]
) -> None:
    # Low item of issue 20: a dashboard (re)started while a batch runs; Streams (3) finds
    # the running batch and follows it instead of saying that nothing is watched.
    # slow enough that the batch outlives the test, fast enough that a request the view
    # sees start (one after the two in flight when it opens) comes within seconds
    sim = start_sim("--tokens-per-s", "20")
    request = BatchRequest(prompts_file(tmp_path / "p.jsonl", 80), tmp_path / "out",
                           (sim.url,), bundled_tokenizer_path(), concurrency=2,
                           max_new_tokens=400)
    launched = asyncio.run(asyncio.to_thread(launch_detached, request.to_config()))
    batch_id = str(launched.record.id)
    try:
        args = ["--view", "capture", "--url", sim.url, "--refresh", "0.3"]
        with PtyTerminal(args, cols=140, rows=50, cwd=tmp_path) as term:
            term.wait_for(batch_id)
            term.press("3")
            term.wait_for(f"batch {batch_id} · running")
            term.wait_for(" ids · streaming")  # a box of one of the next 8 requests
    finally:
        asyncio.run(abort(launched.record.socket))
        wait_until(lambda: Registry().load(batch_id).final_state is not None, 60,
                   f"batch {batch_id} to stop")


async def abort(socket: str) -> None:
    """Abort a detached batch through its control socket."""
    async with BatchClient(socket) as client:
        await client.stop(abort=True)


def test_a_foreground_capture_stopping_after_ctrl_c_shows_no_eta(
    tmp_path: Path, start_sim: Callable[..., SimProcess]
) -> None:
    # Low item of issue 20: the live panel read `ETA 37s [stopping]` after Ctrl-C. The sim
    # runs 4 requests at a time, so the 16 in flight take seconds to drain.
    sim = start_sim("--tokens-per-s", "40", "--max-running-requests", "4")
    args = ["capture", "--display", "rich", "--prompts", str(prompts_file(tmp_path / "p.jsonl",
            400)), "--out", str(tmp_path / "out"), "--server", sim.url, "--tokenizer",
            TOKENIZER, "--max-new-tokens", "48", "--concurrency", "16", "--grace", "60"]
    with PtyTerminal(args, cols=140, rows=30, cwd=tmp_path) as term:
        # any ETA: 400 rows at ~3 a second first show as ETA 2m10s (`\d+s` alone waited a
        # minute for the ETA to drop under 60 s)
        term.wait_until(lambda: re.search(r"ETA \d[\dhms]*\s+\[running\]", term.text())
                        is not None, "an ETA while running", timeout=120)
        term.write(b"\x03")  # Ctrl-C as the terminal sends it (the tty makes it SIGINT)
        term.wait_for("[stopping]")
        term.wait_until(lambda: term.alive() is not None, "the capture to end", timeout=120)
    frames = bytes(term.raw).decode("utf-8", "replace")
    stopping = re.findall(r"ETA (\S+)\s+\[stopping\]", frames)
    assert stopping and set(stopping) == {"—"}, stopping
    assert term.exit_status == 130
