"""Shared fixtures: the simulated SGLang server as a separate process on a free port, and
port-holding processes.

``port_holders`` spawns processes that hold a TCP port (tests/support/portholder.py), all
killed at teardown. Shared helpers (waiting, processes) are in ``tests/support``.

``sim_server`` is one fast sim per test module (no start-up delays, generation as
fast as the HTTP stack allows); tests must not break it (no crash faults, no
SIGTERM). ``start_sim`` starts a private sim for tests that do: its fast flags
come first, so a test's own flags override them (argparse keeps the last value).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from types import ModuleType

import pytest
from support.processes import Holder, reap, spawn_holder
from support.second_user import second_user  # noqa: F401  (a fixture: a real second local user)

from eagle_tui.core.sim.launcher import SimProcess

# pytest rewrites the asserts of ~220 test modules at every collection unless it may cache
# the result: with PYTHONDONTWRITEBYTECODE set (as on the shared machine) each xdist worker
# spent ~9 of its ~15 s of collection rewriting. Only this process caches (in the
# git-ignored __pycache__); the processes tests start keep the user's setting.
sys.dont_write_bytecode = False

FAST_SIM_ARGS = ("--time-scale", "0", "--tokens-per-s", "0", "--ttft", "0")

PROCESS_FIXTURES = frozenset({"sim_server", "start_sim", "sims", "sim", "slow_sim",
                              "port_holders", "garbage_server", "second_user"})
"""Fixtures that start real processes: a test using one is marked ``slow`` automatically
(files that start processes themselves say ``pytestmark = pytest.mark.slow``)."""

_OWN_DIRS: list[str] = []


def pytest_configure(config: pytest.Config) -> None:
    """Every test process gets its own state and config directories, so a test run never
    writes into the user's real ones (start-up history would teach the dashboard test
    windows) nor reads their settings. Tests that need a directory of their own still set
    ``EAGLE_TUI_STATE_DIR`` themselves."""
    for variable in ("EAGLE_TUI_STATE_DIR", "EAGLE_TUI_CONFIG_DIR"):
        directory = tempfile.mkdtemp(prefix=f"eagle-tui-tests-{variable[10:].lower()}-")
        _OWN_DIRS.append(directory)
        os.environ[variable] = directory


def pytest_unconfigure(config: pytest.Config) -> None:
    for directory in _OWN_DIRS:
        shutil.rmtree(directory, ignore_errors=True)


StartSim = Callable[..., SimProcess]
SpawnHolder = Callable[..., Holder]


@pytest.fixture(scope="module")
def sim_server() -> Iterator[SimProcess]:
    """A ready, fast sim shared by the tests of one module."""
    with SimProcess(FAST_SIM_ARGS) as sim:
        sim.wait_ready(timeout=60)
        yield sim


@pytest.fixture
def start_sim() -> Iterator[StartSim]:
    """``start_sim(*extra_args, wait="ready"|"bound"|None, timeout=60)`` -> a SimProcess.

    Every process started here is killed when the test ends.
    """
    started: list[SimProcess] = []

    def start(*extra_args: str, wait: str | None = "ready", timeout: float = 60.0) -> SimProcess:
        sim = SimProcess([*FAST_SIM_ARGS, *extra_args]).start()
        started.append(sim)
        if wait == "ready":
            sim.wait_ready(timeout)
        elif wait == "bound":
            sim.wait_bound(timeout)
        elif wait is not None:
            raise ValueError(f"wait must be 'ready', 'bound' or None, not {wait!r}")
        return sim

    yield start
    for sim in started:
        sim.close()


@pytest.fixture
def port_holders() -> Iterator[SpawnHolder]:
    """``port_holders(*args, module=None)`` -> a Holder bound to a port (``module`` runs it
    as ``python -m MODULE``); every one (and its children) dies at teardown."""
    made: list[Holder] = []

    def make(*args: str, module: str | None = None) -> Holder:
        holder = spawn_holder(*args, module=module)
        made.append(holder)
        return holder

    yield make
    for holder in made:
        reap(holder)


@pytest.fixture(scope="session")
def hf_datasets() -> ModuleType:
    """Hugging Face ``datasets``, imported by the tests that use it (skipped without it):
    imported at collection it costs each worker ~0.5 s of CPU, pandas with it."""
    return pytest.importorskip("datasets")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark ``slow`` every test that uses a process-starting fixture."""
    for item in items:
        if PROCESS_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
