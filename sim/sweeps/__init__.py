"""Sweeps: a scenario's cells (:mod:`.cells`), the chunked run every path takes
(:mod:`.chunks`), and where the chunks run (:mod:`.schedulers`; on Dask:
:mod:`.on_dask`)."""
