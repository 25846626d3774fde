"""The critical path of a step: the chain of dependent CPU work, launches, GPU ops and synchronizations
that decides its time, as HolisticTraceAnalysis 0.5's ``critical_path_analysis`` defines it.

``events``      the trace's events as flat arrays: roles, call/op/sync pairs, queue lengths, HTA's rounding
``graph``       one window's dependency graph, as chains of positions plus launch and sync edges
``cpu_chains``  its CPU side: each thread's call stack walked in time order, as one chain of nodes
``gpu_edges``   its GPU side: each stream's ops as chains, launch delays, kernel gaps, sync edges
``distances``   each node's longest distance from a chain's start: prefix sums plus what enters a chain
``longest``     the longest path through it (prefix sums along chains), with networkx's tie order
``kahn_order``  networkx's order between path ends equal in length and generation, from their trails back
``analysis``    the command: per step, the path's time by what bounds it, the top ops, the path itself
``critical_path_command``  the command, declared
"""
