"""The normalized model: what every reader produces and every analysis consumes.

``schema``     the column contract (one declared schema per table, checked once per load)
``columns``    how a table's columns are declared and checked (``Column``, ``Schema``)
``trace``      ``Trace``: GPU ops, launches, NVTX ranges and metadata of one profile
``derived``    typed per-trace memoization: one accessor per derived table, keyed by its inputs, read-only
``memory``     ``MemoryTrace``: a CUDA memory snapshot as tables
``memory_schema`` the memory snapshot's column contract (events, blocks, segments, annotations)
``range_specs`` the range-spec grammar (``--range``, ``--phases``, ``--within``): the standard library only
``range_names`` range names against specs on tables of ranges: matching, nesting among a selection
``nesting``    parent and depth of ranges on a thread
``result``     ``Result``: what an analysis returns (named tables, notes, figures)
``reading``    how urgent a read is (tables loaded ahead of need wait for the others)
``options``    how a command's options are declared and checked (each command's module declares its own)
``option_fields`` option fields several commands share, and ``ManyOptions`` (how many inputs are read)
``command``    ``Command``: how an analysis command is declared (its module's ``COMMAND``)
``kernel_names`` a kernel name's base name and first template argument

Nothing here imports from ``sources``, ``analysis``, ``render`` or ``cli``.
"""
