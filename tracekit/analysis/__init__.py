"""Analyses: plain functions ``(Trace, options) -> Result`` (named tables of raw values, notes, charts),
grouped by the question they answer. None reads a file or prints; each names options by parameter.
Each command is declared once, in a module ``<name>_command`` beside its analysis: its options (a
dataclass, checked when made) and its ``COMMAND`` (``model.command``), light enough for the command line
to read before pandas.

``stats``     nsys's statistics per group (total, instances, avg, med, min, max, stddev, share)
``primitives/``  what the questions share: op-launch joins, intervals, the step window, op classes
``hardware/``  what the GPU can do and what a kernel or op asked of it: peaks, precision, occupancy, FLOPs
``kernels/``  which kernels ran and for how long: summary, categories, kernel types and overlap
``ranges/``   NVTX ranges and what ran inside them: summary, GPU side, phases (breakdown), steps
``waits/``    why the GPU waited: idle gaps by cause, launch delays, blocking syncs, overlap, queues, ops
``collectives/``  what each collective moved and how fast (bandwidths), from its kernel and torch's record
``efficiency/``  how close the GPU work ran to the hardware: FLOPs, bytes, roofline, occupancy per group
``critical_path/``  the chain of dependent CPU, launch, GPU and sync work that sets a step's time (HTA's)
``memory/``   a memory snapshot's peak: replay, holders and frames, roles, the tables and charts
``advice/``   what to fix first: findings with evidence and recoverable time, nsys's expert rules
``many/``     many inputs: parts merged exactly, on a process pool or Dask; ranks, compare, diff
"""
