"""Fixtures for process tests: real port-holding processes, always cleaned up."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from proc_helpers import Holder, reap, spawn_holder


@pytest.fixture
def holders() -> Iterator[Callable[..., Holder]]:
    """A factory of port holders; every one of them (and its children) dies at teardown."""
    made: list[Holder] = []

    def make(*args: str) -> Holder:
        holder = spawn_holder(*args)
        made.append(holder)
        return holder

    yield make
    for holder in made:
        reap(holder)
