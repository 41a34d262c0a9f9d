"""Server URLs: parsed and checked once, then passed around as a ``ServerURL`` value.

A server URL is a *base*: the client appends ``/generate``, ``/health``... to it. So it may
have a scheme (http or https), a host, a port and a path prefix (a reverse proxy's), but:

- no query string or fragment: ``http://h:30000/?x=1`` would send requests to
  ``/?x=1/health`` and wait for a server that never answers;
- no user info (``http://user:pw@host``) when an API key is given too: httpx would send
  Basic auth and silently drop the ``Bearer`` key;
- no spaces or control characters, and a port in 1-65535.

User info given without an API key is a credential (httpx sends it as Basic auth): the
value keeps it for the HTTP client only (``for_requests``). Every form meant for people or
files (``public``, ``shown``, ``label``, ``str()``, ``repr()``, the JSON of a document that
holds one) leaves it out, and no form ever holds a query string; messages never repeat
either (both may hold a secret). A stored config holds the public form; the user info
reaches a detached worker through its environment only (``core.batches.secretenv``).

Just above the base modules: it raises ``core.errors.BadURL`` (whose text is the problem,
without the URL) and is a ``core.wire.TextValue`` (a document holds it as its public text).
"""

from __future__ import annotations

import re
from urllib.parse import SplitResult, urlsplit

from eagle_tui.core.errors import BadURL
from eagle_tui.core.wire import TextValue

SCHEMES = ("http", "https")
EXAMPLE = "http://host:30000"
USERINFO_AND_KEY = ("carries user:password@ as well as an API key; the user info would replace "
                    "the Bearer key with Basic auth. Drop one of them")


class ServerURL(TextValue):
    """A checked server base URL (see the module doc). Build it with ``parse``.

    ``port`` is None when the URL names none; ``path`` is the prefix without a trailing
    slash; ``userinfo`` is left out of ``repr``, comparison and JSON, and shown nowhere.
    Immutable. A plain class, not a dataclass: msgspec would write a dataclass's fields (the
    user info among them) where a document must hold the public text.
    """

    __slots__ = ("host", "path", "port", "scheme", "userinfo")
    scheme: str
    host: str
    port: int | None
    path: str
    userinfo: str

    def __init__(self, scheme: str, host: str, port: int | None = None, path: str = "",
                 userinfo: str = "") -> None:
        for name, value in (("scheme", scheme), ("host", host), ("port", port),
                            ("path", path), ("userinfo", userinfo)):
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"a ServerURL is immutable (tried to set {name})")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ServerURL) and self._key == other._key

    def __hash__(self) -> int:
        return hash(self._key)

    def __repr__(self) -> str:
        return f"ServerURL({self.public!r})"

    def __reduce__(self) -> tuple[type[ServerURL], tuple[str, str, int | None, str, str]]:
        return ServerURL, (*self._key, self.userinfo)  # copy and pickle past __setattr__

    @property
    def _key(self) -> tuple[str, str, int | None, str]:
        return (self.scheme, self.host, self.port, self.path)

    @classmethod
    def parse(cls, text: str, *, has_key: bool = False) -> ServerURL:
        """The value of ``text``; ``BadURL`` when it cannot be a server base URL.
        ``has_key``: an API key is given too, so user info is refused."""
        problem = server_url_problem(text, has_key=has_key)
        if problem is not None:
            raise BadURL(problem)
        parts = _split(text)
        assert parts is not None  # a URL with no problem splits
        return parts

    @property
    def public(self) -> str:
        """``scheme://host[:port][/prefix]``: no user info, query or fragment. What files,
        JSON and logs carry, and the base requests go to."""
        return f"{self.scheme}://{self.label}"

    @property
    def for_requests(self) -> str:
        """``public`` with the user info put back: only for an HTTP client (httpx sends it
        as Basic auth). Never print it or write it anywhere."""
        if not self.userinfo:
            return self.public
        return f"{self.scheme}://{self.userinfo}@{self.label}"

    @property
    def without_userinfo(self) -> ServerURL:
        """This URL as a record keeps it: the same address, no credential."""
        return ServerURL(*self._key) if self.userinfo else self

    @property
    def shown(self) -> str:
        """``public`` quoted, for a sentence: ``'http://h:30000'``."""
        return repr(self.public)

    @property
    def label(self) -> str:
        """``host:port`` (and the path prefix, when there is one): a short card or table
        label. The host alone when the URL names no port."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        port = f":{self.port}" if self.port is not None else ""
        return f"{host}{port}{self.path}"

    @property
    def effective_port(self) -> int:
        """The TCP port requests go to (80/443 when the URL names none)."""
        if self.port is not None:
            return self.port
        return 443 if self.scheme == "https" else 80

    def __str__(self) -> str:
        return self.public


def url_error(url: str, *, has_key: bool = False, flag: str = "--server") -> str | None:
    """The whole error message for an unusable ``url`` (naming ``flag``), or None."""
    problem = server_url_problem(url, has_key=has_key)
    return None if problem is None else f"{flag} {shown(url)}: {problem}"


def argument_error(url: str, problem: str) -> str:
    """The text of an option's error for ``url``: ``'http://h:9/': has a query string…``
    (the option's name is the caller's, e.g. argparse's ``argument --url:``)."""
    return f"{shown(url)}: {problem}"


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
        return USERINFO_AND_KEY
    return None


def shown(url: str) -> str:
    """``url`` safe to print: scheme, host, port and path only (no user info, query,
    fragment), or a placeholder when it does not even parse."""
    split = _host_and_port(url)
    if split is None:
        return "(an unparsable URL)"
    parts, host_port = split
    text = f"{parts.scheme}://{host_port}{parts.path}" if parts.netloc else (
        f"{parts.scheme}:{parts.path}" if parts.scheme else parts.path)  # "localhost:30000"
    return repr("".join(c if c.isprintable() else "?" for c in text))


def _split(url: str) -> ServerURL | None:
    """The parts of ``url`` as a value, without checking them (None when it does not split)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    userinfo = parts.netloc.rpartition("@")[0] if "@" in parts.netloc else ""
    return ServerURL(parts.scheme.lower(), parts.hostname or "", port, parts.path.rstrip("/"),
                     userinfo=userinfo)


_URL_IN_TEXT = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s'\"]*[^\s'\";,.)\]}]")
REDACTED = "<redacted>"

# A credential's name, read on the name flattened to lower case with ``_`` for ``-``:
# ``api_key``/``OPENAI_API_KEY``/``apiKey``, a name ending in ``_key`` or ``token``
# (``HF_TOKEN``, ``--hf-token``, ``accessToken``), anything with ``secret``, ``password``,
# ``credential`` or ``authorization`` in it, AWS's ``ACCESS_KEY_ID``. ``tokens`` and
# ``tokenizer`` are no secrets, nor is ``token_usage``.
_SECRET_NAME = re.compile(
    r"api_?key|access_?key|private_?key|_key$|token$|secret|passw(?:or)?d|passphrase"
    r"|credential|authorization|(?:^|_)auth$"
)
# A value as it is written: quoted (to the closing quote, or to the end when a clip cut it
# off; a JSON ``\"`` stays inside), an HTTP scheme and its credential, or one word.
_VALUE = (r"(?:\"(?:[^\"\\]|\\.)*(?:\"|$)|'[^']*(?:'|$)"
          r"|(?:Bearer|Basic|Token|Digest)\s+[^\s'\",;)}\]]+|[^\s'\",;)}\]]+)")
_KEPT = frozenset({"None", "null", "''", '""', REDACTED})  # nothing secret to hide
# Where a credential's value begins: after a flag (``--api-key X``, ``--api-key=X``; never
# before another flag) or a name with ``=``/``:`` (``HF_TOKEN=X``, ``"api_key": "X"``,
# ``{'api_key': 'X'}``, ``api_key = 'X'``, ``Authorization: Bearer X``). A name glued to
# ``#`` or ``-`` is none: SGLang's own counters ``#token: N``, ``#new-token: N``.
_FLAG = re.compile(r"(?<![\w#-])(?P<name>--?[A-Za-z][\w-]*)(?:=|[ \t]+)(?!--)")
_ASSIGN = re.compile(r"(?<![\w#-])(?P<q>[\"']?)(?P<name>[A-Za-z][\w-]*)(?P=q)\s*[=:]\s*")
_VALUE_AT = re.compile(_VALUE)
_SCHEME = re.compile(r"(?:Bearer|Basic|Token|Digest)\s+")
_BEARER = re.compile(r"\b(?:Bearer|bearer|BEARER)\s+(?!<redacted>)[^\s'\",;)}\]]+")
# ``user:password@host`` without a scheme (a scheme's URL is made public as a whole).
_BARE_USERINFO = re.compile(r"(?<![\w/@.%+:-])[\w.%+-]+:[^\s@/:'\"]+@(?=[\w\[])")


def is_secret_name(name: str) -> bool:
    """A setting, flag or variable whose value is a credential (``api_key``, ``--hf-token``,
    ``AWS_SECRET_ACCESS_KEY``, ``Authorization``…); not ``max_new_tokens``, not ``tokenizer``."""
    flat = name.strip("-").replace("-", "_").lower()
    return _SECRET_NAME.search(flat) is not None


def redact(text: str) -> str:
    """``text`` safe to paste into an issue: every URL without user info, query string or
    fragment, ``user:password@`` before a host, and the value of every credential replaced
    by ``<redacted>``: flags (``--api-key X``, ``--api-key "two words"``), assignments and
    keys (``HF_TOKEN=…``, ``"api_key": "…"``, ``{'api_key': '…'}``, ``api_key = '…'``),
    ``Authorization: Bearer …`` and a bare ``Bearer …``. SGLang's own counters
    (``#token: N``, ``#new-token: N``, ``#cached-token: N``) are figures, kept as they are."""
    text = _URL_IN_TEXT.sub(lambda m: _url_redacted(m.group(0)), text)
    text = _BARE_USERINFO.sub(REDACTED + "@", text)
    text = _values_redacted(_FLAG, text)
    text = _values_redacted(_ASSIGN, text)
    return _BEARER.sub(lambda m: m.group(0).split(None, 1)[0] + " " + REDACTED, text)


def _values_redacted(names: re.Pattern[str], text: str) -> str:
    """The value after each credential name ``names`` finds, replaced. Names are found one
    at a time and values only read after a credential's, so a plain name's value never
    hides the next name (``error: token=X``)."""
    out, done = [], 0
    for found in names.finditer(text):
        if found.start() < done or not is_secret_name(found.group("name")):
            continue
        value = _VALUE_AT.match(text, found.end())
        if value is None or value.group() in _KEPT:
            continue
        out += [text[done : value.start()], _placeholder(value.group())]
        done = value.end()
    return "".join(out) + text[done:]


def _placeholder(value: str) -> str:
    """``<redacted>`` in the value's own quotes, after its HTTP scheme (``Bearer``)."""
    scheme = _SCHEME.match(value)
    if scheme is not None:
        return scheme.group() + REDACTED
    closed = len(value) > 1 and value[0] in "'\"" and value[-1] == value[0]
    return f"{value[0]}{REDACTED}{value[0]}" if closed else REDACTED


def _url_redacted(url: str) -> str:
    split = _host_and_port(url)
    if split is None:
        return "(an unparsable URL)"
    parts, host_port = split
    return f"{parts.scheme}://{host_port}{parts.path}"


def _host_and_port(url: str) -> tuple[SplitResult, str] | None:
    """``url`` split, and its ``host[:port]`` without user info (an IPv6 host in brackets);
    None when it does not split."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port is not None else ""
    except ValueError:
        return None
    return parts, (f"[{host}]" if ":" in host else host) + port
