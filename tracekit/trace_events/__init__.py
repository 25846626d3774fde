"""Timelines: traces as one Chrome trace-event file (the JSON Perfetto UI, chrome://tracing and
TensorBoard open), written as a stream in bounded memory.

``writer``  the file: header, then every input's tracks, into a temporary file renamed into place
``tracks``  the events of one input, track by track: GPU ops per stream, API calls, ranges, flow arrows,
            steps, idle gaps by cause, and the names of processes and tracks
``text``    event text a column at a time (Arrow string kernels), exact decimal microseconds
``window``  which stretch of a trace to write: ms from its start, a step, an instance of a range
``sequence_track``  the kernel sequences a trace repeats as tracks, an occurrence a slice
``collective_track``  collectives per process group as tracks: each one's wait for the last peer, then its transfer
"""
