"""Request ids that can be aborted one by one or per run, never by accident.

SGLang's ``/abort_request`` matches by prefix (``rid.startswith(x)``), so aborting
``cap-1`` would also abort ``cap-10``. Every rid here has the same length
(``cap-<8 hex run tag>-<12-digit sequence>``), and two distinct strings of equal length
cannot prefix each other. The run tag is random per run, so a resumed run never collides
with stale requests of an earlier one, and ``run_prefix`` aborts exactly this run's
requests. A retry gets a fresh rid: the earlier attempt may still be running on the server
(after a timeout), and reusing its rid would be refused as a duplicate.
"""

from __future__ import annotations

import secrets

SEQUENCE_DIGITS = 12
_LIMIT = 10**SEQUENCE_DIGITS


class RidAllocator:
    """Hands out ``cap-<tag>-<sequence>`` rids, all of one length."""

    def __init__(self, tag: str | None = None) -> None:
        self.tag = tag if tag is not None else secrets.token_hex(4)
        if len(self.tag) != 8 or not self.tag.isalnum():
            raise ValueError(f"rid tag must be 8 alphanumeric characters, got {self.tag!r}")
        self.run_prefix = f"cap-{self.tag}-"
        self._next = 0

    def next(self) -> str:
        """A rid never handed out before in this run."""
        if self._next >= _LIMIT:
            raise OverflowError("rid sequence exhausted (10^12 requests in one run)")
        rid = f"{self.run_prefix}{self._next:0{SEQUENCE_DIGITS}d}"
        self._next += 1
        return rid

    @property
    def issued(self) -> int:
        """How many rids were handed out."""
        return self._next
