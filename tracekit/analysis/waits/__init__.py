"""Why the GPU waited, and for how long.

``idle``         every gap between a GPU's busy intervals, with its cause (``idle``)
``launches``     launch and queue delays as nsys's kernexecsum (``launches``)
``syncs``        blocking host calls and the GPU idle after them (``syncs``)
``overlap``      communication hidden by computation per GPU (``overlap``)
``ops``          per CPU operator, its kernels and the delay to its first kernel (``ops``)
``queues``       each stream's launch queue: its length over time, statistics, time full (``queues``)
``idle_command``, ``launches_command``, ``syncs_command``, ``overlap_command``, ``ops_command``,
``queues_command``  the commands, declared
"""
