"""The batch directory: its one owner (datatrove's ``DataFolder`` is the model).

Every file name in a batch directory, the lock on it, and opening it (fresh, or resumed
with its repairs) live here; every other module asks for paths and never spells a name.

- ``layout``: ``BatchDir`` (the path of every file: manifest, shards, failures, rejects,
  logs, ``untrusted/``, the lock, the control socket) and the shard file names;
- ``lock``: ``OutputLock``, ``is_held``, ``holder_of`` (one controller per directory);
- ``owned``: ``claim_batch_dir``, ``own_subdir`` (only a directory of ours, writable by
  nobody else; ``shards/`` and ``untrusted/`` real folders of ours);
- ``scan``: ``scan_completed``, ``ResumeScan``, ``IgnoredFile``, ``listing_problem``
  (which shards are trusted; reads, never changes anything);
- ``opening``: ``open_batch_dir`` (a fresh batch, or a resumed one after its repairs:
  ``drop_untrusted``, ``remove_temp_files``, ``move_aside``), ``identity_changes``.

``layout``, ``lock`` and ``owned`` import only the standard library, ``msgspec`` and
``core.errors`` / ``core.fsio`` / ``core.trust``, so batch bookkeeping (which needs no
parquet) uses them freely; ``scan`` and ``opening`` read parquet.
"""
