"""Sweeps: a scenario's cells (:mod:`.cells`), the chunked run every path takes
(:mod:`.chunks`), where the chunks run (:mod:`.schedulers`; on Dask:
:mod:`.on_dask`), and Ctrl-C for a program started with SIGINT ignored
(:mod:`.ctrl_c`)."""
