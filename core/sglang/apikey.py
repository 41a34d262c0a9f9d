"""The API key file (``--api-key-file``): read bounded, from a regular file only.

A key is a line of text; a file larger than ``MAX_KEY_FILE_BYTES`` is not a key file
(``/dev/zero`` or a FIFO given by mistake is refused before a byte is read, instead of
filling memory or hanging).
"""

from __future__ import annotations

from pathlib import Path

from eagle_tui.core.errors import ConfigError, UnfitFile
from eagle_tui.core.fsio import KIB, describe_os_error, read_small

MAX_KEY_FILE_BYTES = 64 * KIB


def read_api_key(path: Path) -> str | None:
    """The key in ``path`` (stripped; None when the file is blank); ConfigError naming the
    file and what to do when it cannot be a key file."""
    try:
        data = read_small(path, MAX_KEY_FILE_BYTES, "API key file")
    except UnfitFile as e:
        raise ConfigError(str(e)) from None
    except OSError as e:
        raise ConfigError(f"cannot read API key file {path}: {describe_os_error(e)}; "
                          "pass a readable file holding the key") from None
    try:
        return data.decode("utf-8").strip() or None
    except UnicodeDecodeError:
        raise ConfigError(f"API key file {path} is not UTF-8 text; pass the file holding "
                          "the key") from None
