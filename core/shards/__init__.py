"""Shards: the parquet format, the atomic writer, the manifest, the reader and resume.

Public names (import from the submodules):

- ``schema``: ``SHARD_SCHEMA``, ``ShardRow``, ``ShardMetadata``, ``rows_to_table``;
- ``manifest``: ``Manifest``, ``BatchConfig``, ``ShardInfo``, ``Counts``;
- ``writer``: ``ShardWriter``;
- ``reader``: ``ShardReader``, ``ShardFile``;
- ``resume``: ``completed_sample_ids``, ``scan_completed``, ``drop_untrusted``,
  ``remove_temp_files``;
- ``stats``: ``compute_stats``, ``BatchStats``;
- ``render``: ``sample_text`` (rich Text of one sample, segment by segment);
- ``chain``: several batch directories (the ``--shard I/N`` slices of a job) read as one;
- ``conversations``: a multi-turn batch's conversations, their rows in turn order.

Their errors are in ``core.errors``; the ``inspect`` and ``stats`` verbs are in ``tui/cli``.
"""
