"""The dashboard's server options: --url, --log and --pid pair up by position; no --url means
discovery."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from support.clock import FakeClock

from eagle_tui.core.errors import ConfigError
from eagle_tui.core.urls import ServerURL
from eagle_tui.tui.dashboard import TuiConfig, add_arguments, options_from, server_targets
from eagle_tui.tui.options import DashboardOptions, ServerTarget
from eagle_tui.tui.sources import default_sources


def test_pid_pairs_with_the_url_in_the_same_position() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(
        ["--url", "http://a:1", "--pid", "41", "--url", "http://b:2", "--log", "a.log"]
    )
    targets = options_from(args, TuiConfig(), {}).servers
    assert targets == (
        ServerTarget(ServerURL.parse("http://a:1"), log_file=Path("a.log"), pid=41),
        ServerTarget(ServerURL.parse("http://b:2")),
    )
    with pytest.raises(ConfigError, match="2 --pid values for 1 --url"):
        server_targets([ServerURL.parse("http://a:1")], [], [1, 2])


def test_no_url_means_the_servers_are_discovered() -> None:
    assert default_sources(DashboardOptions(), FakeClock()).discovery is not None
    named = DashboardOptions(servers=(ServerTarget(ServerURL.parse("http://a:1")),))
    assert default_sources(named, FakeClock()).discovery is None
