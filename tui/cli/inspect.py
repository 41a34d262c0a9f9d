"""``eagle-tui inspect DIR|FILE [--id ID | --flag F | --index N]``: one stored sample, decoded.

Prints the sample's provenance and flags, then its prompt, reasoning, the think/end-of-think
boundaries, answer, tool-call tokens and stop token, each visibly distinguished (colour and a
textual marker; see :mod:`core.shards.render`). Ids are decoded with the tokenizer named in
the shard metadata (or the manifest), or ``--tokenizer PATH``; ``--raw-ids`` prints ids
instead and needs no tokenizer.

Exit status: 0 shown, 1 nothing matched, 2 bad input (path, tokenizer, index).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.text import Text

from eagle_tui.core import kimi
from eagle_tui.core.errors import EagleError, InspectError, TokenizerError
from eagle_tui.core.export.sources import open_batches
from eagle_tui.core.segments import split_segments
from eagle_tui.core.shards.chain import ReaderChain
from eagle_tui.core.shards.conversations import conversation_indices, is_multi_turn
from eagle_tui.core.shards.reader import ShardReader
from eagle_tui.core.shards.render import Decode, TokenName, legend, sample_text
from eagle_tui.core.shards.schema import ShardMetadata, ShardRow
from eagle_tui.core.text import terminal_safe
from eagle_tui.core.tokenizer import BoundaryIds
from eagle_tui.core.validate import FLAGS
from eagle_tui.tui.render.literal_rich import Literal


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``inspect`` verb's arguments."""
    parser.add_argument("path", type=Path, nargs="+",
                        help="batch directory, shards directory or shard; or several batch "
                             "directories (the --shard slices of one job, checked disjoint)")
    pick = parser.add_mutually_exclusive_group()
    pick.add_argument("--id", dest="sample_id", help="the sample with this sample_id")
    pick.add_argument("--flag", help=f"the first sample with this flag ({', '.join(FLAGS)})")
    pick.add_argument("--index", type=int, help="the sample at this row (negative: from end)")
    pick.add_argument("--conversation", metavar="ID",
                      help="every turn of this conversation, in order (multi-turn batches)")
    parser.add_argument("--tokenizer", type=Path, help="tokenizer directory to decode with")
    parser.add_argument("--trust-remote-code", action="store_true",
                        help="allow the tokenizer's own code to run (Kimi's real tokenizer)")
    parser.add_argument("--raw-ids", action="store_true", help="print ids, do not decode")
    parser.add_argument("--prompt-tokens", type=int, default=None, metavar="N",
                        help="show only the last N prompt tokens")


def run(args: argparse.Namespace, console: Console | None = None) -> int:
    """Show the chosen sample; errors go to stderr with what to do."""
    out = console or make_console()
    try:
        reader = open_reader(args.path)
        indices = select_indices(reader, args)
        decode, token_name, boundary = decoder_for(reader, args)
    except EagleError as e:
        print(f"eagle-tui inspect: {e}", file=sys.stderr)
        return e.status if isinstance(e, InspectError) else 2
    for index in indices:
        show(out, reader, index, args, (decode, token_name, boundary))
    return 0


def select_indices(reader: Reader, args: argparse.Namespace) -> list[int]:
    """The rows to show: one sample, or every turn of ``--conversation`` in order."""
    if getattr(args, "conversation", None) is None:
        return [select_index(reader, args)]
    if not isinstance(reader, ShardReader):
        raise InspectError("--conversation reads one batch directory; give only the one "
                           "that holds the conversation")
    indices = conversation_indices(reader, args.conversation)
    if not indices:
        what = "" if is_multi_turn(reader) else " (its shards are single-turn)"
        raise InspectError(f"no conversation {args.conversation!r} in {where(args.path)}{what}",
                           1)
    return indices


def show(out: Console, reader: Reader, index: int, args: argparse.Namespace,
         decoding: tuple[Decode, TokenName, BoundaryIds]) -> None:
    """Print row ``index``: its header, the legend and the decoded sequence."""
    decode, token_name, boundary = decoding
    row = reader.row(index)
    shard, position = reader.shard_of(index)
    out.print(Literal(header(row, index, reader.num_rows, f"{shard.path.name}:{position}")),
              soft_wrap=True)
    out.print(Literal(legend()), soft_wrap=True)
    first = 0 if args.prompt_tokens is None else max(0, row.prompt_len - args.prompt_tokens)
    segments = split_segments(row.input_ids, row.prompt_len, boundary)
    text = sample_text(row.input_ids, segments, decode, token_name, first_prompt_id=first)
    out.print(Literal(text), soft_wrap=True)  # no inserted line breaks: the text stays exact


Reader = ShardReader | ReaderChain


def open_reader(paths: list[Path]) -> Reader:
    """One path's reader, or the verified batches of one job read as one."""
    if len(paths) == 1:
        return ShardReader(paths[0])
    return ReaderChain([b.reader for b in open_batches(paths)])


def where(paths: Path | list[Path]) -> str:
    """The path(s) given, for messages."""
    return " ".join(map(str, paths)) if isinstance(paths, list) else str(paths)


def make_console() -> Console:
    """A console that never interprets text: no markup, no highlighting, no emoji."""
    return Console(markup=False, highlight=False, emoji=False, soft_wrap=True)


def select_index(reader: Reader, args: argparse.Namespace) -> int:
    """The global row index the arguments name; InspectError when none matches."""
    if reader.num_rows == 0:
        raise InspectError(f"no complete shards in {where(args.path)}; nothing to inspect", 1)
    if args.sample_id is not None:
        index = reader.index_of(args.sample_id)
        if index is None:
            raise InspectError(f"no sample with id {args.sample_id!r} in {where(args.path)}", 1)
        return index
    if args.flag is not None:
        found = reader.index_with_flag(args.flag)
        if found is None:
            known = "" if args.flag in FLAGS else f" (known flags: {', '.join(FLAGS)})"
            raise InspectError(f"no sample has flag {args.flag!r} in {where(args.path)}{known}", 1)
        return found
    index = args.index if args.index is not None else 0
    if not -reader.num_rows <= index < reader.num_rows:
        raise InspectError(f"--index {index} is out of range: {where(args.path)} holds "
                           f"{reader.num_rows} rows (0..{reader.num_rows - 1})")
    return index % reader.num_rows


def decoder_for(
    reader: Reader, args: argparse.Namespace
) -> tuple[Decode, TokenName, BoundaryIds]:
    """How to decode ids and name tokens, and the boundary ids to segment with."""
    metadata = reader.metadata
    stored = boundaries_from_metadata(metadata)
    if args.raw_ids:
        return raw_decode, lambda _tid: None, stored or kimi_boundaries()
    from eagle_tui.core.tokenizer import load_tokenizer

    path = args.tokenizer or tokenizer_path(reader, metadata)
    if path is None:
        raise InspectError(f"{where(args.path)} does not name a tokenizer; pass --tokenizer PATH "
                           "(or --raw-ids)")
    try:
        tokenizer = load_tokenizer(path, trust_remote_code=args.trust_remote_code)
    except TokenizerError as e:
        raise InspectError(f"{e}; or pass --tokenizer PATH, or --raw-ids to see ids") from e
    if metadata and metadata.tokenizer_fingerprint not in ("", tokenizer.fingerprint()):
        print(f"eagle-tui inspect: warning: tokenizer {path} differs from the one the shards "
              "were captured with (fingerprint); text may be wrong", file=sys.stderr)

    def decode(ids: Sequence[int]) -> str:
        return tokenizer.decode(ids, skip_special_tokens=False)

    return decode, tokenizer.id_to_token, stored or tokenizer.boundary_ids()


def tokenizer_path(reader: Reader, metadata: ShardMetadata | None) -> Path | None:
    """The tokenizer recorded in the shard footer, else in the manifest."""
    if metadata and metadata.tokenizer_path:
        return Path(metadata.tokenizer_path)
    if reader.manifest and reader.manifest.config.tokenizer_path:
        return Path(reader.manifest.config.tokenizer_path)
    return None


def boundaries_from_metadata(metadata: ShardMetadata | None) -> BoundaryIds | None:
    """The boundary ids the capture used, as recorded in the shard footer."""
    if metadata is None or not metadata.boundary_ids:
        return None
    raw = metadata.boundary_ids
    return BoundaryIds(
        think=raw.get("think"),
        think_end=raw.get("think_end"),
        stop=tuple(raw.get("stop") or ()),
        tool_call=frozenset(raw.get("tool_call") or ()),
    )


def kimi_boundaries() -> BoundaryIds:
    """Kimi's default ids, for raw display of files without metadata."""
    return BoundaryIds(kimi.THINK, kimi.THINK_END, (kimi.IM_END,), kimi.TOOL_CALL_IDS)


def raw_decode(ids: Sequence[int]) -> str:
    """Ids as space-separated numbers."""
    return " ".join(str(i) for i in ids) + " "


def header(row: ShardRow, index: int, total: int, where: str) -> Text:
    """Provenance, finish, lengths and flags of the sample (literal text)."""
    output_len = len(row.input_ids) - row.prompt_len
    think_end = f"{row.think_end}" if row.think_end >= 0 else "none"
    stop = f" (matched {row.matched_stop})" if row.matched_stop is not None else ""
    text = Text()
    text.append("sample ", "bold")
    text.append(terminal_safe(row.sample_id), "bold")  # from a prompt file: shown, never run
    text.append(f"   row {index} of {total}   {where}\n")
    text.append(f"finish {terminal_safe(row.finish_reason)}{stop}   prompt {row.prompt_len} "
                f"tokens   output {output_len} tokens   think_end at {think_end}\n")
    text.append(f"endpoint {terminal_safe(row.endpoint)}   rid {terminal_safe(row.rid)}   "
                f"latency {row.latency_s:.2f} s   created {row.created_at.isoformat()}\n")
    if row.conversation_id is not None:
        parent = terminal_safe(row.parent_id) if row.parent_id else "none"
        text.append(f"conversation {terminal_safe(row.conversation_id)}   turn {row.turn}   "
                    f"parent {parent}\n")
    text.append("flags: ", "bold")
    if row.flags:
        text.append(", ".join(row.flags), "bold red")
    else:
        text.append("none (clean)", "green")
    return text
