"""Nsight Systems SQLite exports -> ``Trace``.

``export``          the reader: GPU ops, launches and metadata of an export (``read_nsys_export``)
``ranges``          NVTX ranges (push/pop and start/end), nested, read only as far as specs can match
``meta``            what the export says about itself: nsys version, schema, GPUs, process and rank
``checks``          which tables and columns an export has, and the error when it is not one
``gpu_reads``       the SQL reads behind the GPU-op table (kernels, memcpy, memset), by column
``sqlite_columns``  the columnar reader: integer columns straight into numpy, chunk by chunk
``read_pool``       the threads SQLite chunks are read on (the session's, most urgent first)
``read_ahead``      reads started before a command's input opens (its imports still loading)
``string_ids``      the StringIds table, only the ids asked for
``thread_ids``      nsys's global thread ids: process and thread in one int64
``thread_names``    the names nsys recorded of processes and threads (the timeline's host tracks)
``rule_tables``     what nsys's expert rules read besides: copies' memory kinds, the profiler's overhead
``syncs``           the GPU side of synchronizations, with the event each waited for (the critical path)
"""
