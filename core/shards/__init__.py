"""Shards: the batch directory, the parquet format, the atomic writer, the manifest, the reader.

Public names (import from the submodules):

- ``batchdir``: the batch directory's one owner: ``layout.BatchDir`` (every path in it),
  ``lock.OutputLock``, ``scan.scan_completed`` (trusted shards), ``opening.open_batch_dir``
  (fresh, or resumed with its repairs);
- ``schema``: ``SHARD_SCHEMA``, ``ShardRow``, ``ShardMetadata``, ``rows_to_table``;
- ``manifest``: ``Manifest``, ``BatchConfig``, ``ShardInfo``, ``Counts``;
- ``writer``: ``ShardWriter``;
- ``reader``: ``ShardReader``, ``ShardFile``;
- ``conversations``: ``is_multi_turn``, ``ConversationCounter``;
- ``stats``: ``compute_stats``, ``BatchStats``;
- ``render``: ``sample_text`` (rich Text of one sample, segment by segment).

Opening a job of several batches, selecting rows and decoding them is ``core.samples``.

Their errors are in ``core.errors``; the ``inspect`` and ``stats`` verbs are in ``tui/cli``.
"""
