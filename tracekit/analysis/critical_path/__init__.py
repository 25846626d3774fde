"""The critical path of a step: the chain of dependent CPU work, launches, GPU ops and synchronizations
that decides its time: by default tracekit's definition (HolisticTraceAnalysis 0.5's ``critical_path_analysis``
with two of its artifacts corrected: a stream's long wait is not overhead, and the path stops at its step's
end), or HTA's exactly.

``events``      the trace's events as flat arrays: roles, call/op/sync pairs, queue lengths, HTA's rounding
``graph``       one window's dependency graph, as chains of positions plus launch and sync edges
``cpu_chains``  its CPU side: each thread's call stack walked in time order, as one chain of nodes
``gpu_edges``   its GPU side: each stream's ops as chains, launch delays, kernel gaps, sync edges
``definition``  tracekit's corrections to HTA's graph: a stream's long gap is a wait, the step's end clips the path
``distances``   each node's longest distance from a chain's start: prefix sums plus what enters a chain
``longest``     the longest path through it (prefix sums along chains), with networkx's tie order
``kahn_order``  networkx's order between path ends equal in length and generation, from their trails back
``analysis``    the command: per step, the path's time by what bounds it, the top ops, the path itself
``critical_path_command``  the command, declared
"""
