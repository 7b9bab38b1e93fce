"""Speculation: what is guessed, what is kept, and what the guessing costs.

Acceptance as an input (:mod:`.acceptance`, replayed traces in
:mod:`.acceptance_trace`, read with the shared table readers of
:mod:`.steplog_tables`), token trees (:mod:`.tree`), per-batch-size k schedules
(:mod:`.schedule`) and the proposers (:mod:`.proposers`, one module each,
registered by ``speculative.method``). Imports only the layers below.
"""
