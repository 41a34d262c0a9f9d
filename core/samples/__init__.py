"""Stored samples as every reader sees them: ``inspect``, ``stats``, ``export`` and the
dashboard's Inspect view open, select and decode rows here, so they agree by construction.

Public names (import from the submodules):

- ``job``: ``open_job``, ``Job`` (one path, or the ``--shard`` slices of a job read as one),
  ``open_batches``, ``SourceBatch``, ``SourceShard``, ``check_one_job``, ``missing_slices``,
  ``incomplete_job``, ``RESTORE`` (batch directories verified as an export's input);
- ``select``: ``SampleFilter``, ``matching_rows``, ``first_matching``, ``conversation_rows``,
  ``Pick``, ``pick_rows`` (which rows);
- ``decode``: ``choose_tokenizer``, ``boundaries_for``, ``decoding_for``, ``Decoding``,
  ``SharedTokenizer``, ``fingerprint_warning``, ``KIMI_BOUNDARIES`` (how rows are decoded);
- ``notbatch``: ``refuse_no_batch``, ``batches_below`` (a directory that is no batch).
"""
