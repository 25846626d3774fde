"""torch.profiler (Kineto) Chrome-trace JSON -> ``Trace``.

``reader``        the reader: kernels, copies, runtime calls and annotations into the column contract
``gpu_columns``   GPU-side rows' columns (times, int ranges, by correlation from calls); gpu_syncs
``events``        events decoded by type into columns (never a dict per event)
``comms``         each collective's recorded args (record_param_comms), kept sparse
``header``        the text around the events: devices, the distributed job, the time base
``json_stream``   the document streamed and cut into chunks of events; a UTF-8 BOM, gzip
``parallel``      a large trace's chunks decoded on several processes
``ours``          files ``tracekit timeline`` wrote (left out of folders of traces)
``decimal_text``  numbers written as JSON text (microseconds with decimals) read exactly as ns
"""
