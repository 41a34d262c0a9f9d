"""Text for people: one-line progress, the end-of-run summary (no terminal handling here)."""

from __future__ import annotations

from eagle_tui.core.capture.engine import CaptureSummary
from eagle_tui.core.capture.failures import NOT_RETRIED_ON_RESUME
from eagle_tui.core.capture.progress import CaptureProgress, progress_fields
from eagle_tui.core.shards.batchdir.layout import BatchDir
from eagle_tui.core.text import counts_text, duration
from eagle_tui.core.validate import ENDINGS_SHOWN


def progress_line(snapshot: CaptureProgress) -> str:
    """One log line: counts, load, rates and ETA."""
    f = progress_fields(snapshot.counts)
    servers = " ".join(f"{s.url}={s.state}:{s.in_flight}" for s in snapshot.servers)
    return (
        f"[{snapshot.state}] {f.rows} rows: {f.done} done ({f.written} saved), "
        f"{f.already_done} done before, {f.failed} failed, {f.flagged} flagged, "
        f"{f.rejected} rejected | {f.in_flight} in flight, {f.retrying} retrying | "
        f"{f.samples_per_s} samples/s, {f.tokens_per_s} tok/s | "
        f"ETA {f.eta} | errors: {counts_text(snapshot.errors)} | {servers}"
        + (f" | {snapshot.ended_early} turns not generated (conversations ended early)"
           if snapshot.ended_early else "")
    )


def summary_text(summary: CaptureSummary) -> str:
    """The end-of-run report: outcome, counts, errors by kind, where things are."""
    snapshot, p = summary.progress, summary.progress.counts
    f, batch = progress_fields(p), BatchDir(summary.out_dir)
    lines = [
        f"capture {summary.state} after {duration(p.elapsed_s)}"
        + (f": {summary.reason}" if summary.reason else ""),
        f"  rows saved this run   {f.written}  ({p.output_tokens:,} output tokens, "
        f"{f.samples_per_s} samples/s at the end)",
        f"  done in earlier runs  {f.already_done}",
        f"  failed permanently    {f.failed}  ({counts_text(snapshot.failures)})",
        f"  prompts rejected      {f.rejected}",
        f"  flagged rows          {f.flagged}  ({counts_text(snapshot.flags)})",
        f"  left for a resume     {_left(snapshot)}",
        *_not_generated(snapshot),
        f"  attempt errors        {counts_text(snapshot.errors)}",
        f"  shards                {batch.shards} (manifest: {batch.manifest})",
    ]
    if p.done > p.written:
        lines.insert(2, f"  generated, not saved  {p.done - p.written}  (their shard was not "
                        "written; a resume captures them again)")
    if p.failed:
        kept = _kept(snapshot)
        lines.append(f"  failures              {batch.failures} "
                     "(retried by the next --resume"
                     + (f"; {kept} too long for the context only with --retry-failed)"
                        if kept else ")"))
    if p.rejected:
        lines.append(f"  rejects               {batch.rejects}")
    if summary.prompts_without_think:
        lines.append(f"  note: {summary.prompts_without_think} prompts did not end with the "
                     "think token (rows flagged prompt_no_think)")
    lines.extend(f"  note: {note}" for note in summary.notes)
    return "\n".join(lines)


def _not_generated(p: CaptureProgress) -> list[str]:
    """Turns of multi-turn conversations that ended early (counted as settled, never sent),
    per reason, and the first endings by name."""
    if not p.ended_early:
        return []
    lines = [f"  turns not generated   {p.ended_early}  (conversations ended before their "
             f"last turn: {counts_text(p.ended_reasons)})"]
    lines += [f"    {ending}" for ending in p.endings]
    if len(p.endings) >= ENDINGS_SHOWN:
        lines.append("    (eagle-tui stats BATCH lists the endings; capture.log has every one)")
    return lines


def _left(snapshot: CaptureProgress) -> str:
    """Rows a resume would still send: never settled, generated but not saved, plus the
    failed ones (retried)."""
    p = snapshot.counts
    if p.remaining is None:
        return "unknown"
    left = p.remaining + p.failed - _kept(snapshot) + (p.done - p.written)
    return f"{left}" + (" (continue with --resume)" if left else "")


def _kept(snapshot: CaptureProgress) -> int:
    """Failed rows a plain --resume does not resend (see NOT_RETRIED_ON_RESUME)."""
    return sum(snapshot.failures.get(kind, 0) for kind in NOT_RETRIED_ON_RESUME)
