"""``eagle-tui inspect DIR|FILE [--id ID | --flag F | --index N]``: one stored sample, decoded.

Prints the sample's provenance, its acceptance when a speculating server answered it (accept
length, rate, verify steps, P(>=j); as the Streams view showed it live) and its flags, then
its prompt, reasoning, the think/end-of-think
boundaries, answer, tool-call tokens and stop token, each visibly distinguished (colour and a
textual marker; see :mod:`core.shards.render`). Rows are opened, picked and decoded by
``core.samples`` (the Inspect view's rules too): the tokenizer is ``--tokenizer PATH``, else
the batch's recorded one where it is now, else the bundled one when the shards name it;
``--raw-ids`` prints ids instead and needs no tokenizer.

Exit status: 0 shown, 1 nothing matched, 2 bad input (path, tokenizer, index, a shard that is
not the shard format).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.text import Text

from eagle_tui.core.argtypes import DirIn, Line, PathIn, Whole
from eagle_tui.core.errors import EagleError, InspectError, TokenizerError
from eagle_tui.core.samples.decode import (
    SharedTokenizer,
    choose_tokenizer,
    decoding_for,
    fingerprint_warning,
    recorded_fingerprints,
)
from eagle_tui.core.samples.job import Job, open_job
from eagle_tui.core.samples.select import CLEAN, FLAGGED, Pick, pick_rows
from eagle_tui.core.shards.render import legend, sample_text
from eagle_tui.core.shards.schema import ShardRow
from eagle_tui.core.text import terminal_safe
from eagle_tui.core.validate import ENDED_FLAG, FLAGS, ending_reason, ending_text
from eagle_tui.tui.render.accept import stored_acceptance_text
from eagle_tui.tui.render.literal_rich import Literal

MAX_INDEX = (1 << 63) - 1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``inspect`` verb's arguments."""
    parser.add_argument("path", type=PathIn("batch directory, shards directory or shard"),
                        nargs="+",
                        help="batch directory, shards directory or shard; or several batch "
                             "directories (the --shard slices of one job, checked disjoint)")
    pick = parser.add_mutually_exclusive_group()
    pick.add_argument("--id", dest="sample_id", type=Line("a sample id"),
                      help="the sample with this sample_id")
    pick.add_argument("--flag", choices=(*FLAGS, CLEAN, FLAGGED), metavar="FLAG",
                      help=f"the first sample with this flag ({', '.join(FLAGS)}), or the "
                           "first clean / flagged one")
    pick.add_argument("--index", type=Whole(-MAX_INDEX, MAX_INDEX),
                      help="the sample at this row (negative: from end)")
    pick.add_argument("--conversation", metavar="ID", type=Line("a conversation id"),
                      help="every turn of this conversation, in order (multi-turn batches)")
    parser.add_argument("--tokenizer", type=DirIn("tokenizer directory"),
                        help="tokenizer directory to decode with")
    parser.add_argument("--trust-remote-code", action="store_true",
                        help="allow the tokenizer's own code to run (Kimi's real tokenizer)")
    parser.add_argument("--raw-ids", action="store_true", help="print ids, do not decode")
    parser.add_argument("--prompt-tokens", type=Whole(0, MAX_INDEX), default=None, metavar="N",
                        help="show only the last N prompt tokens")


def run(args: argparse.Namespace, console: Console | None = None) -> int:
    """Show the chosen sample; errors go to stderr with what to do."""
    out = console or make_console()
    try:
        job = open_job(args.path)
        indices = pick_rows(job, pick_of(args), where(args.path))
        tokenizer = None if args.raw_ids else tokenizer_for(job, args)
    except EagleError as e:
        print(f"eagle-tui inspect: {terminal_safe(str(e))}", file=sys.stderr)
        return e.status if isinstance(e, InspectError) else 2
    try:
        for index in indices:
            show(out, job, index, args, tokenizer)
    except EagleError as e:  # a shard that lies about its rows (a null the format forbids)
        print(f"eagle-tui inspect: {terminal_safe(str(e))}", file=sys.stderr)
        return 2
    return 0


def pick_of(args: argparse.Namespace) -> Pick:
    """The rows the arguments ask for."""
    return Pick(sample_id=args.sample_id, flag=args.flag, index=args.index,
                conversation=getattr(args, "conversation", None))


def show(out: Console, job: Job, index: int, args: argparse.Namespace,
         tokenizer: SharedTokenizer | None) -> None:
    """Print row ``index``: its header, the legend and the decoded sequence."""
    row = job.row(index)
    shard, position = job.shard_of(index)
    decoding = decoding_for(job.footer_of(index), job.manifest, tokenizer)
    out.print(Literal(header(row, index, job.num_rows, f"{shard.path.name}:{position}")),
              soft_wrap=True)
    out.print(Literal(legend()), soft_wrap=True)
    first = 0 if args.prompt_tokens is None else max(0, row.prompt_len - args.prompt_tokens)
    decode, token_name = ((tokenizer.decode, tokenizer.token_text) if tokenizer is not None
                          else (raw_decode, no_name))
    text = sample_text(row.input_ids, decoding.segments(row), decode, token_name,
                       first_prompt_id=first)
    out.print(Literal(text), soft_wrap=True)  # no inserted line breaks: the text stays exact


def tokenizer_for(job: Job, args: argparse.Namespace) -> SharedTokenizer:
    """The tokenizer the shared rule chooses (``core.samples.decode``), loaded; InspectError
    says what to pass when there is none or it does not load."""
    from eagle_tui.core.tokenizer.light import load_for_decoding

    choice = choose_tokenizer(args.tokenizer, job.manifest, job.metadata)
    if choice.path is None:
        raise InspectError(f"{where(args.path)}: {choice.why}; pass --tokenizer PATH (or "
                           "--raw-ids)")
    try:  # without transformers when tokenizers alone decodes it the same (core/tokenizer/light)
        tokenizer = SharedTokenizer(load_for_decoding(
            choice.path, trust_remote_code=args.trust_remote_code,
            recorded=recorded_fingerprints(job.manifest, job.metadata)))
    except TokenizerError as e:
        raise InspectError(f"{e}; or pass --tokenizer PATH, or --raw-ids to see ids") from e
    warning = fingerprint_warning(tokenizer, job.manifest, job.metadata)
    if warning:
        print(f"eagle-tui inspect: warning: {warning}", file=sys.stderr)
    return tokenizer


def where(paths: Path | list[Path]) -> str:
    """The path(s) given, for messages."""
    return " ".join(map(str, paths)) if isinstance(paths, list) else str(paths)


class PlainConsole(Console):
    """A console that never interprets text: no markup, no highlighting, no emoji. A reader
    of stdout that left early (``| head``) ends the verb as it ends every other: the
    ``BrokenPipeError`` goes to ``tui.cli.main`` (141), where rich would exit 1 itself."""

    def on_broken_pipe(self) -> None:
        """rich's hook for a closed stdout: hand the error to the command's entry point."""
        self.quiet = True
        raise BrokenPipeError


def make_console() -> Console:
    """A console that never interprets text: no markup, no highlighting, no emoji."""
    return PlainConsole(markup=False, highlight=False, emoji=False, soft_wrap=True)


def raw_decode(ids: Sequence[int]) -> str:
    """Ids as space-separated numbers."""
    return " ".join(str(i) for i in ids) + " "


def no_name(_token_id: int) -> str | None:
    """Raw ids name no token (markers show their kind)."""
    return None


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
    acceptance = stored_acceptance_text(row.acceptance)
    if acceptance:  # only an answer of a speculating server stored any
        text.append(f"{acceptance}\n")
    if row.conversation_id is not None:
        parent = terminal_safe(row.parent_id) if row.parent_id else "none"
        text.append(f"conversation {terminal_safe(row.conversation_id)}   turn {row.turn}   "
                    f"parent {parent}\n")
        if ENDED_FLAG in row.flags:
            reason = ending_reason(row.flags, row.finish_reason)
            text.append(terminal_safe(ending_text(row.conversation_id, row.turn or 0, reason))
                        + " (no later turn was generated)\n", "bold yellow")
    text.append("flags: ", "bold")
    if row.flags:
        text.append(", ".join(row.flags), "bold red")
    else:
        text.append("none (clean)", "green")
    return text
