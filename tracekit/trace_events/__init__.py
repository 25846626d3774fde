"""Timelines: traces as one file Perfetto UI opens: Perfetto's protobuf format (.pftrace), or the Chrome
trace-event JSON that chrome://tracing and TensorBoard open too, written as a stream in bounded memory.

``writer``  the file: header, then every input's tracks, into a temporary file renamed into place
``output_names``  the file's name: its suffix picks the format; the default name when none is given
``tracks``  the events of one input, track by track: GPU ops per stream, API calls, ranges (an operator's
            recorded inputs as args), Python calls, flow arrows, steps, idle gaps by cause, and the names
            of processes and tracks
``events``  those events as columns, before any format: each format encodes the same decisions
``json_format``  the columns as Chrome trace-event JSON
``perfetto``  the columns as Perfetto's protobuf packets (interned names, incremental clocks)
``protobuf``  protobuf messages a column at a time (numpy: no Python object per event)
``track_event_fields``  what a slice's begin carries (name, category, arguments, arrows), shared combinations once
``clock``   several inputs on one clock: each by its absolute time base, else by its first step
``text``    event text a column at a time (Arrow string kernels), exact decimal microseconds
``window``  which stretch of a trace to write: ms from its start, a step, an instance of a range
``sequence_track``  the kernel sequences a trace repeats as tracks, an occurrence a slice
``stream_lanes``  ops that overlap on one stream, on lanes beside it (ops of a stream cannot run at once)
``merged_slices``  kinds that share tracks (a thread's ranges, calls, Python calls) as one stream by start
``track_lanes``  slices that cross on a track (a thread's ranges and calls, an annotation and its kernels), on
            lanes beside it: every track's slices nest
``collective_track``  collectives per process group as tracks: each one's wait for the last peer, then its transfer
``counter_tracks``  counters per GPU: each stream's launch-queue length, each direction's copy bandwidth (HTA's)
"""
