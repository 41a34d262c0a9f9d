"""Output tokens a batch has stored, over all its runs, without reading its token ids.

A row's output is its ``input_ids`` past ``prompt_len``. The parquet footer already counts
the ids: a row group's ``input_ids`` leaf column holds one value per id (a row always has
ids), so Σ output = Σ leaf values - Σ ``prompt_len``, from the footers and the one small
integer column. What a worker counted per run is lost when it ends (a resume that captured
nothing would read "0 tokens"); the shards are what the batch holds.
"""

from __future__ import annotations

import pyarrow.compute as pc
import pyarrow.parquet as pq

from eagle_tui.core.shards.reader import ShardReader

IDS_LEAF = "input_ids.list.element"


def stored_output_tokens(reader: ShardReader) -> int:
    """Output tokens in the rows of ``reader``'s shards."""
    ids = sum(_leaf_values(reader, index) for index in range(len(reader.shards)))
    prompts = sum(int(pc.sum(table.column(0)).as_py() or 0)
                  for table in reader.iter_batches(["prompt_len"]))
    return max(0, ids - prompts)


def _leaf_values(reader: ShardReader, index: int) -> int:
    metadata = pq.ParquetFile(reader.shards[index].path).metadata
    column = next((i for i in range(metadata.num_columns)
                   if metadata.schema.column(i).path == IDS_LEAF), None)
    if column is None:  # not a capture shard: no ids to count
        return 0
    return sum(metadata.row_group(group).column(column).num_values
               for group in range(metadata.num_row_groups))


__all__ = ["stored_output_tokens"]
