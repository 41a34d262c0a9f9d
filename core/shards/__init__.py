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
- ``errors``: ``ShardError``, ``ShardWriteError``;
- ``inspect_cli`` / ``stats_cli``: the ``inspect`` and ``stats`` verbs.
"""
