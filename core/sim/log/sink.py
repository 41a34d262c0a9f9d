"""The server log: SGLang-formatted lines and tqdm-style bar writes on one stream.

SGLang prefixes every line with ``[%Y-%m-%d %H:%M:%S]``; scheduler processes add a
rank tag (`` TP3``) when tensor parallelism is above 1 (always, in the 0.4
dialect), the main process none. The log's ``dialect`` words the lines.
Progress bars are written raw: tqdm redraws them with ``\\r`` and ends with ``\\n``.
Every write is flushed at once so a reader tailing the file sees it immediately.
"""

from __future__ import annotations

import threading
import time
from typing import TextIO

from eagle_tui.core.sim.log.dialect import LogDialect


class SimLog:
    """Writes the simulated server's log to ``stream``."""

    def __init__(self, stream: TextIO, tp_size: int, dialect: LogDialect) -> None:
        self._stream = stream
        self._tp_size = tp_size
        self.dialect = dialect
        self._lock = threading.Lock()
        self._stamp_second = -1
        self._stamp = ""

    @property
    def tp_size(self) -> int:
        """Tensor-parallel ranks whose tags appear in the log."""
        return self._tp_size

    def main(self, message: str) -> None:
        """A line from the main (HTTP / tokenizer manager) process: no rank tag."""
        self.raw(f"[{self.timestamp()}] {message}\n")

    def rank(self, rank: int, message: str) -> None:
        """A line from scheduler rank ``rank``; tagged ``TPn`` when TP > 1 or the dialect says."""
        tag = f" TP{rank}" if self._tp_size > 1 or self.dialect.tag_single_rank else ""
        self.raw(f"[{self.timestamp()}{tag}] {message}\n")

    def every_rank(self, message: str) -> None:
        """The same line from every scheduler rank, in rank order."""
        for rank in range(self._tp_size):
            self.rank(rank, message)

    def raw(self, text: str) -> None:
        """Write ``text`` as is (bars, traceback continuation lines) and flush."""
        with self._lock:
            self._stream.write(text)
            self._stream.flush()

    def timestamp(self) -> str:
        """Local time as SGLang prints it, cached per second (lines are frequent)."""
        now = time.time()
        second = int(now)
        if second != self._stamp_second:
            self._stamp_second = second
            self._stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now))
        return self._stamp
