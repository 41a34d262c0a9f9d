"""What a process in a server's tree is, read from its title: launcher, scheduler rank
(with its DP/PP/TP/EP tags), detokenizer, a compiler child, or something else.

SGLang names its processes with ``setproctitle`` (``sglang/srt/managers/scheduler.py``
``configure_scheduler_process``): ``sglang::scheduler`` for a single rank, else
``sglang::scheduler`` followed by ``_DP{d}``, ``_PP{p}``, ``_ATTN_CP{c}``, ``_MOE_DP{m}``,
``_TP{t}``, ``_EP{e}`` for each parallel dimension larger than one (DP whenever data
parallelism is on); ``sglang::detokenizer``, ``sglang::data_parallel_controller``,
``sglang::detokenizer_router``, ``sglang::tokenizer_worker:PID``. The diffusion runtime uses
``sgl_diffusion::scheduler_N``. ``/proc/PID/comm`` keeps 15 characters of it
(``sglang::schedul``), so the title is read from the command line.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from eagle_tui.core.outside import clean

_TAG = re.compile(r"_(DP|PP|ATTN_CP|MOE_DP|TP|EP)(\d+)")
_TAG_ORDER = ("DP", "PP", "ATTN_CP", "MOE_DP", "TP", "EP")
_SGLANG_PREFIXES = ("sglang::", "sgl_diffusion::")

COMPILERS = frozenset({
    "nvcc", "cicc", "ptxas", "nvlink", "fatbinary", "cudafe++", "nvdisasm", "hipcc",
    "clang", "clang++", "gcc", "g++", "c++", "cc", "cc1", "cc1plus", "as", "ld", "ld.gold",
    "ld.lld", "collect2", "ninja", "make", "cmake",
})  # fmt: skip
"""Programs a JIT build runs (FlashInfer and tvm-ffi: ninja → nvcc → cicc/ptxas, g++ →
cc1plus; DeepGEMM: nvcc; triton: ptxas). While one burns CPU the start-up is busy, not hung."""


class Kind(StrEnum):
    """A process's part in the server."""

    LAUNCHER = "launcher"
    SCHEDULER = "scheduler"
    DETOKENIZER = "detokenizer"
    CONTROLLER = "data parallel controller"
    TOKENIZER = "tokenizer worker"
    COMPILER = "compiler"
    OTHER = "other"


_KIND_ORDER = {kind: index for index, kind in enumerate(Kind)}


@dataclass(frozen=True)
class Role:
    """A process's kind and, for a scheduler, its rank tags (``{"DP": 1, "TP": 3}``)."""

    kind: Kind
    title: str
    tags: tuple[tuple[str, int], ...] = field(default=())

    @property
    def label(self) -> str:
        """``TP3``, ``DP1 TP3``, ``scheduler`` (one rank), ``detokenizer``, ``ptxas``."""
        if self.tags:
            return " ".join(f"{name}{value}" for name, value in self.tags)
        if self.kind in (Kind.COMPILER, Kind.OTHER):
            return self.title
        return self.kind.value

    def tag(self, name: str) -> int | None:
        """The rank number for ``name`` (``"TP"``), or None."""
        return dict(self.tags).get(name)

    @property
    def sort_key(self) -> tuple[int, tuple[int, ...]]:
        """Launcher, schedulers by rank, then the rest."""
        return _KIND_ORDER[self.kind], tuple(dict(self.tags).get(name, -1) for name in _TAG_ORDER)


_MULTIPROCESSING = (
    ("multiprocessing.resource_tracker", "resource tracker"),
    ("multiprocessing.spawn", "spawned child (no title yet)"),
    ("multiprocessing.forkserver", "fork server"),
)


def title_of(argv: Sequence[str] | None, comm: str) -> str:
    """The name a person knows the process by: the setproctitle title, multiprocessing's
    helpers by their job (an SGLang rank reads ``python -c from multiprocessing.spawn …``
    until it sets its title), else the program. Any user sets a title (``exec -a``, a write
    to ``/proc/self/comm``), so it is made clean here (``core.outside``) for every view."""
    return clean(_raw_title(argv, comm))


def _raw_title(argv: Sequence[str] | None, comm: str) -> str:
    if argv:
        first = argv[0].strip()
        if first.startswith(_SGLANG_PREFIXES):
            return first.split()[0]
        if "-c" in argv[1:3]:
            code = argv[argv.index("-c") + 1] if argv.index("-c") + 1 < len(argv) else ""
            for module, name in _MULTIPROCESSING:
                if module in code:
                    return name
    return comm


def role_of(argv: Sequence[str] | None, comm: str, *, is_root: bool) -> Role:
    """Classify one process of the tree (``is_root``: the process the watch was given)."""
    title = title_of(argv, comm)
    if title.startswith(_SGLANG_PREFIXES):
        body = title.split("::", 1)[1]
        if body.startswith("scheduler"):
            tags = _tags(body)
            return Role(Kind.SCHEDULER, title, tags)
        if body.startswith("detokenizer"):
            return Role(Kind.DETOKENIZER, title)
        if body.startswith("data_parallel_controller"):
            return Role(Kind.CONTROLLER, title)
        if body.startswith("tokenizer_worker"):
            return Role(Kind.TOKENIZER, title)
        return Role(Kind.OTHER, title)
    if is_root:
        return Role(Kind.LAUNCHER, title)
    program = clean(os.path.basename(argv[0]) if argv else comm)
    if comm in COMPILERS or program in COMPILERS:
        return Role(Kind.COMPILER, comm if comm in COMPILERS else program)
    return Role(Kind.OTHER, title if title != clean(comm) else title or program)


def _tags(body: str) -> tuple[tuple[str, int], ...]:
    found = {name: int(value) for name, value in _TAG.findall(body)}
    if not found and body.startswith("scheduler_") and body[10:].isdigit():
        found["TP"] = int(body[10:])  # sgl_diffusion::scheduler_N
    return tuple((name, found[name]) for name in _TAG_ORDER if name in found)
