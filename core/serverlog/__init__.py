"""SGLang server logs: follow a log file (``follower``) and parse its lines into typed
events (``parser``, driven by the one pattern table in ``patterns``)."""

from eagle_tui.core.serverlog.follower import LogChunk, LogFollower
from eagle_tui.core.serverlog.parser import parse_line, parse_lines

__all__ = ["LogChunk", "LogFollower", "parse_line", "parse_lines"]
