"""The tokenizer a server names, for the New-batch form's default.

SGLang's ``/model_info`` reports ``tokenizer_path`` and ``model_path`` as it was given them:
a local directory, or a Hugging Face id (then there is nothing here to prefill: the form
stays empty rather than guess). Asked off the UI thread, with short timeouts.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from eagle_tui.core.sglang.types import ModelInfo
    from eagle_tui.core.urls import ServerURL

TOKENIZER_FILES = ("tokenizer_config.json", "tokenizer.json", "tokenizer.model")
ASK_TIMEOUT_S = 3.0


def local_tokenizer_dir(info: ModelInfo) -> Path | None:
    """``tokenizer_path``, else ``model_path``, when it is a directory here holding a
    tokenizer; None otherwise (a Hugging Face id, a path on another machine)."""
    for named in (info.tokenizer_path, info.model_path):
        if not named:
            continue
        path = Path(named).expanduser()
        if path.is_dir() and any((path / name).is_file() for name in TOKENIZER_FILES):
            return path
    return None


def server_tokenizer(urls: tuple[ServerURL, ...]) -> tuple[Path, ServerURL] | None:
    """The local tokenizer directory the first answering server names, and that server
    (BLOCKING: call from a worker thread); None when none names one."""
    from eagle_tui.core.sglang.client import ClientTimeouts, SGLangClient

    timeouts = ClientTimeouts(connect=ASK_TIMEOUT_S, info=ASK_TIMEOUT_S)

    async def ask(url: ServerURL) -> ModelInfo:
        async with SGLangClient(url, timeouts=timeouts) as client:
            return await client.model_info()

    for url in urls:
        try:
            info = asyncio.run(ask(url))
        except Exception:  # no answer is no default, never an error
            continue
        found = local_tokenizer_dir(info)
        if found is not None:
            return found, url
    return None
