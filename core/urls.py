"""Server URLs as the user gives them: checked before anything is sent to them.

A server URL is a *base*: the client appends ``/generate``, ``/health``... to it. So it may
have a scheme (http or https), a host, a port and a path prefix (a reverse proxy's), but:

- no query string or fragment: ``http://h:30000/?x=1`` would send requests to
  ``/?x=1/health`` and wait for a server that never answers;
- no user info (``http://user:pw@host``) when an API key is given too: httpx would send
  Basic auth and silently drop the ``Bearer`` key;
- no spaces or control characters, and a port in 1-65535.

Messages never repeat the query or the user info (either may hold a secret). A base
module: it imports nothing of the project; callers raise the error that fits them.
"""

from __future__ import annotations

from urllib.parse import urlsplit

SCHEMES = ("http", "https")
EXAMPLE = "http://host:30000"


def url_error(url: str, *, has_key: bool = False, flag: str = "--server") -> str | None:
    """The whole error message for an unusable ``url`` (naming ``flag``), or None."""
    problem = server_url_problem(url, has_key=has_key)
    return None if problem is None else f"{flag} {shown(url)}: {problem}"


def server_url_problem(url: str, *, has_key: bool = False) -> str | None:
    """Why ``url`` cannot be a server base URL, or None when it can (see the module doc)."""
    if any(c.isspace() or not c.isprintable() for c in url):
        return "holds spaces or control characters; give the plain base URL, e.g. " + EXAMPLE
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as e:
        return f"is not a valid URL ({e}); give the base URL, e.g. {EXAMPLE}"
    if parts.scheme.lower() not in SCHEMES:
        return f"is not an http(s) URL; give the base URL, e.g. {EXAMPLE}"
    if not parts.hostname:
        return f"names no host; give the base URL, e.g. {EXAMPLE}"
    if port == 0:
        return "has port 0; give the port the server listens on"
    if "?" in url:
        return ("has a query string; requests would go to '/?…/generate' and never reach "
                "the server. Give the base URL only (the API key goes in EAGLE_TUI_API_KEY)")
    if "#" in url:
        return "has a fragment ('#…'); give the base URL only, e.g. " + EXAMPLE
    if has_key and "@" in parts.netloc:
        return ("carries user:password@ as well as an API key; the user info would replace "
                "the Bearer key with Basic auth. Drop one of them")
    return None


def shown(url: str) -> str:
    """``url`` safe to print: scheme, host, port and path only (no user info, query,
    fragment), or a placeholder when it does not even parse."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port is not None else ""
    except ValueError:
        return "(an unparsable URL)"
    if ":" in host:
        host = f"[{host}]"
    text = f"{parts.scheme}://{host}{port}{parts.path}"
    return repr("".join(c if c.isprintable() else "?" for c in text))
