"""Export: batch directories -> a file the drafter trainers' own loaders accept, ids exact.

Public names (import from the submodules):

- ``run``: ``export``, ``ExportResult`` (the whole job, streamed, written atomically);
- ``options``: ``ExportOptions``, ``RowFilter``, ``FORMATS``, ``MASK_STARTS``,
  ``DEFAULT_MASK_START``, ``DEFAULT_DROP_FLAGS`` (what is written and which rows are kept);
- ``tally``: ``KeepTally``, ``KeepCounts``, ``preview`` (what an export would keep, for
  ``stats`` and the Inspect view);
- the input batches are opened and verified by ``core.samples.job.open_batches`` (shared
  with ``stats``, ``inspect`` and the Inspect view);
- ``encode``: row groups -> JSONL bytes or parquet with ``loss_mask``, whole columns at once;
- ``background``: the threads that hash and write the data file and read the next row group
  while one is encoded;
- ``manifest``: ``manifest_path_for`` and the manifest written beside the export.

docs/export.md explains the formats, the mask start and the trainers' recipes.
"""
