"""Faults while serving: error, reset and garbage rates, and a crash after N requests.

Rates come from the command line and can be changed at run time through
``POST /sim/faults``. Draws use their own seeded generator (``--fault-seed``)
so a test can reproduce a sequence of faults.
"""

from __future__ import annotations

import random
from typing import Any, Literal

from eagle_tui.core.sim.config import FaultRates

Fault = Literal["reset", "error", "garbage"]

_RATE_KEYS = ("error_rate", "reset_rate", "garbage_rate")


class FaultInjector:
    """Decides, per ``/generate`` request, whether it fails and how."""

    def __init__(self, rates: FaultRates, seed: int | None,
                 crash_after_requests: int | None) -> None:
        self.rates = rates
        self._rng = random.Random(seed)
        self._crash_after = crash_after_requests
        self._counted = 0

    def pick(self) -> Fault | None:
        """The fault for the next request, or None for a normal answer."""
        draw = self._rng.random()
        choices: tuple[tuple[Fault, float], ...] = (
            ("reset", self.rates.reset_rate), ("error", self.rates.error_rate),
            ("garbage", self.rates.garbage_rate),
        )
        for fault, rate in choices:
            if draw < rate:
                return fault
            draw -= rate
        return None

    def error_status(self) -> int:
        """503 (queue full) most of the time, else 500."""
        return 503 if self._rng.random() < 0.7 else 500

    def garbage(self) -> bytes:
        """A 200 body that is not JSON: a truncated object with junk bytes."""
        junk = bytes(self._rng.randrange(256) for _ in range(self._rng.randint(8, 48)))
        return b'{"text":"' + junk + b'","output_ids":[163606,'

    def count_answer(self) -> bool:
        """Count one answered request; True when the crash-after budget is used up."""
        self._counted += 1
        return self._crash_after is not None and self._counted >= self._crash_after

    def update(self, body: dict[str, Any]) -> None:
        """Apply ``POST /sim/faults``; raises ValueError on a bad value."""
        values = {key: self._rate(body, key) for key in _RATE_KEYS}
        self.rates = FaultRates(**values)
        if "crash_after_requests" in body:
            count = body["crash_after_requests"]
            if count is not None and (not isinstance(count, int) or count < 1):
                raise ValueError("crash_after_requests must be a positive integer or null")
            self._crash_after = count
            self._counted = 0
        if body.get("fault_seed") is not None:
            self._rng = random.Random(body["fault_seed"])

    def snapshot(self) -> dict[str, Any]:
        """The current settings, as ``/sim/faults`` and ``/sim/state`` show them."""
        remaining = None if self._crash_after is None else self._crash_after - self._counted
        return {"error_rate": self.rates.error_rate, "reset_rate": self.rates.reset_rate,
                "garbage_rate": self.rates.garbage_rate,
                "crash_after_requests": self._crash_after, "requests_until_crash": remaining}

    def _rate(self, body: dict[str, Any], key: str) -> float:
        value = body.get(key, getattr(self.rates, key))
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
            raise ValueError(f"{key} must be a number in [0, 1], got {value!r}")
        return float(value)
