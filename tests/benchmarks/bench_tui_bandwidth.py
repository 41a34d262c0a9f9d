"""Bytes the dashboard writes to its terminal, per view, next to real monitors in the same run.

Starts ``eagle-tui demo`` (simulated server, a capture batch, eight live streams) on a
pseudo-terminal of 120×40, and beside it ``btop`` and ``htop`` on terminals of the same
size. Once the demo's batch is capturing, it shows each view for a while and counts the
bytes each program wrote per second over the same windows, then prints the ratios
(targets: Server view <= btop, Streams view <= 2 × btop).

``--fleet 16`` watches a fleet instead of the demo: 16 simulated servers (each its own
process), 4 ready with a detached capture batch sending to them and 12 loading slowly
(``--time-scale 30``: about ten minutes of start-up), the dashboard given every one with
``--url``/``--log`` (target: Fleet view <= btop). ``--screenshot FILE`` writes the
dashboard's screen as text when the last view has been measured.

    .venv/bin/python tests/benchmarks/bench_tui_bandwidth.py [--seconds 20] [--refresh S]
        [--reference btop --reference htop] [--views server,capture,streams,inspect,fleet]
        [--fleet 16 [--screenshot docs/screenshots/fleet-16.txt]]

Terminal queries are not answered (as on a terminal that ignores them); every program
sees TERM=xterm-256color and a UTF-8 locale. ``--refresh`` is passed to the demo.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
import pty
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pyte

ROOT = Path(__file__).resolve().parents[2]
COLS, ROWS = 120, 40
VIEW_KEYS = {"server": "1", "capture": "2", "streams": "3", "inspect": "4", "fleet": "5"}
FLEET_READY = 4
"""Of a ``--fleet``: servers that are ready and capture; the others are loading."""
SETTLE_S = 3.0
"""After switching views: the switch repaints the whole screen once; not steady state."""


@dataclass
class Terminal:
    """A program on its own pseudo-terminal; a thread counts what it writes."""

    name: str
    argv: list[str]
    env: dict[str, str]
    process: subprocess.Popen[bytes] | None = None
    primary: int = -1
    written: int = 0
    marks: list[tuple[float, int]] = field(default_factory=list)
    screen: pyte.Screen = field(default_factory=lambda: pyte.Screen(COLS, ROWS))
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> None:
        primary, secondary = pty.openpty()
        fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
        self.process = subprocess.Popen(
            self.argv, stdin=secondary, stdout=secondary, stderr=secondary, env=self.env,
            start_new_session=True, close_fds=True,
        )
        os.close(secondary)
        self.primary = primary
        threading.Thread(target=self._read, name=f"read-{self.name}", daemon=True).start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self.primary, 65536)
            except OSError:
                return
            if not data:
                return
            with self._lock:
                self.written += len(data)
                self._stream.feed(data)

    def __post_init__(self) -> None:
        self._stream = pyte.ByteStream(self.screen)

    def text(self) -> str:
        """What the terminal shows now, one row per line."""
        with self._lock:
            return "\n".join(line.rstrip() for line in self.screen.display)

    def count(self) -> int:
        with self._lock:
            return self.written

    def send(self, keys: str) -> None:
        os.write(self.primary, keys.encode())

    def stop(self, quit_keys: str = "") -> None:
        process = self.process
        if process is None:
            return
        if quit_keys and process.poll() is None:
            with contextlib.suppress(OSError):
                self.send(quit_keys)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=15)
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=10)
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        with contextlib.suppress(OSError):
            os.close(self.primary)


def reference(name: str, home: Path) -> Terminal:
    """btop, htop or ``top`` with their default refresh, in a private HOME."""
    argv = {"btop": ["btop", "--utf-force"], "htop": ["htop"], "top": ["top"]}[name]
    env = {**base_env(), "HOME": str(home / name)}
    (home / name).mkdir(parents=True, exist_ok=True)
    return Terminal(name, argv, env)


def base_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "TMUX")}
    env.update(TERM="xterm-256color", LANG="C.UTF-8", LC_ALL="C.UTF-8",
               COLUMNS=str(COLS), LINES=str(ROWS))
    return env


def wait_for_capture(state: Path, timeout: float = 120.0) -> None:
    """Until the demo's batch has finished a few samples (the server serves, streams run)."""
    import asyncio

    from eagle_tui.core.batches.registry import Registry
    from eagle_tui.core.batches.survey import survey_all

    deadline = time.monotonic() + timeout
    registry = Registry(state / "batches")
    while time.monotonic() < deadline:
        records = registry.all()
        if records:
            view = asyncio.run(survey_all(records))[0]
            if view.progress is not None and view.progress.done >= 8:
                return
        time.sleep(0.5)
    raise TimeoutError("the demo batch did not start capturing")


def measure(terminals: list[Terminal], seconds: float) -> dict[str, float]:
    """Bytes per second each terminal wrote over the next ``seconds``."""
    before = {t.name: t.count() for t in terminals}
    started = time.monotonic()
    time.sleep(seconds)
    elapsed = time.monotonic() - started
    return {t.name: (t.count() - before[t.name]) / elapsed for t in terminals}


def start_fleet(count: int, home: Path, env: dict[str, str]) -> tuple[list[str], list[object]]:
    """``count`` sims (``FLEET_READY`` ready, the rest loading), a detached capture batch on
    the ready ones; the dashboard's argv watching all of them."""
    from eagle_tui.core.sim.launcher import SimProcess
    from eagle_tui.core.tokenizer import bundled_tokenizer_path

    fast = ["--time-scale", "0", "--tokens-per-s", "100", "--ttft", "0", "--enable-metrics"]
    slow = ["--time-scale", "30", "--enable-metrics"]
    sims = [SimProcess(fast if i < FLEET_READY else slow, log_path=home / f"sim{i:02d}.log")
            for i in range(count)]
    for sim in sims:
        sim.start()
    for sim in sims[:FLEET_READY]:
        sim.wait_ready(300)
    prompts = home / "prompts.jsonl"
    prompts.write_text("".join(
        f'{{"id": "q{i}", "messages": [{{"role": "user", "content": "question {i}"}}]}}\n'
        for i in range(20000)))
    servers = [arg for sim in sims[:FLEET_READY] for arg in ("--server", sim.url)]
    subprocess.run([sys.executable, "-m", "eagle_tui.tui.cli", "capture", "--prompts",
                    str(prompts), "--tokenizer", str(bundled_tokenizer_path()), "--out",
                    str(home / "out"), *servers, "--concurrency", "8", "--max-new-tokens",
                    "256", "--detach"], env=env, check=True, capture_output=True)
    watch = [arg for sim in sims for arg in ("--url", sim.url, "--log", str(sim.log_path))]
    return [sys.executable, "-m", "eagle_tui.tui.cli", *watch, "--view", "fleet"], sims


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="per view")
    parser.add_argument("--refresh", type=float, default=None, help="the demo's --refresh")
    parser.add_argument("--reference", action="append", default=None,
                        choices=("btop", "htop", "top"))
    parser.add_argument("--views", default=None)
    parser.add_argument("--fleet", type=int, default=0, help="watch this many sims instead")
    parser.add_argument("--screenshot", type=Path, default=None)
    args = parser.parse_args()
    args.views = args.views or ("fleet,server" if args.fleet else
                                "server,capture,streams,inspect")
    references = args.reference or ["btop", "htop"]
    missing = [name for name in references if shutil.which(name) is None]
    if missing:
        sys.exit(f"not installed: {', '.join(missing)} (apt-get install -y {' '.join(missing)})")
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        state = home / "state"
        env = {**base_env(), "EAGLE_TUI_STATE_DIR": str(state),
               "EAGLE_TUI_CONFIG_DIR": str(home / "config")}
        sims: list[object] = []
        if args.fleet:
            argv, sims = start_fleet(args.fleet, home, env)
        else:
            argv = [sys.executable, "-m", "eagle_tui.tui.cli", "demo", "--time-scale", "0",
                    "--prompts", "2000"]
        if args.refresh is not None:
            argv += ["--refresh", str(args.refresh)]
        demo = Terminal("eagle-tui", argv, env)
        others = [reference(name, home) for name in references]
        terminals = [demo, *others]
        try:
            for terminal in terminals:
                terminal.start()
            wait_for_capture(state)
            results: dict[str, dict[str, float]] = {}
            for view in args.views.split(","):
                demo.send(VIEW_KEYS[view])
                time.sleep(SETTLE_S)
                results[view] = measure(terminals, args.seconds)
                if args.screenshot is not None and view == "fleet":
                    args.screenshot.write_text(demo.text() + "\n", encoding="utf-8")
        finally:
            demo.stop(quit_keys="q")
            for terminal in others:
                terminal.stop(quit_keys="q")
            stop_fleet(sims, home)
    report(results, references, args)


def stop_fleet(sims: list[object], home: Path) -> None:
    """Abort the fleet's batch (its worker outlives the dashboard) and stop the sims."""
    if not sims:
        return
    subprocess.run([sys.executable, "-m", "eagle_tui.tui.cli", "stop", str(home / "out"),
                    "--abort"], env={**base_env(), "EAGLE_TUI_STATE_DIR": str(home / "state")},
                   check=False,
                   capture_output=True, timeout=120)
    for sim in sims:
        sim.close()  # type: ignore[attr-defined]


def report(results: dict[str, dict[str, float]], references: list[str],
           args: argparse.Namespace) -> None:
    refresh = f", --refresh {args.refresh:g}" if args.refresh is not None else ""
    print(f"bytes written to a {COLS}x{ROWS} terminal, {args.seconds:g} s per view "
          f"(demo capturing{refresh}; references running alongside):")
    for view, rates in results.items():
        ours = rates["eagle-tui"]
        parts = [f"{view:<8} {ours / 1024:6.1f} KB/s"]
        for name in references:
            theirs = rates[name]
            ratio = ours / theirs if theirs else float("inf")
            parts.append(f"{name} {theirs / 1024:5.1f} KB/s (×{ratio:.2f})")
        print("  " + " · ".join(parts))
    fleet = f"; {args.fleet} servers watched" if args.fleet else ""
    print(f"targets: Server and Fleet views <= btop (×1), Streams view <= 2 × btop (×2){fleet}")


if __name__ == "__main__":
    main()
