"""The access lines of eagle-tui's own polls, which say nothing about the server."""

from __future__ import annotations

import re

OUR_POLLS = re.compile(
    r'"GET /(health|health_generate|metrics|workers|server_info|get_server_info) HTTP/[\d.]+" ')
"""Access lines of our own polls (``/health``, ``/metrics``, ``/server_info``, a router's
``/workers``): never a server's "last log", hidden in quiet mode."""
