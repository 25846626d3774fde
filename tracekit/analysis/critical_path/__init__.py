"""The critical path of a step: the chain of dependent CPU work, launches, GPU ops and synchronizations
that decides its time, as HolisticTraceAnalysis 0.5's ``critical_path_analysis`` defines it.

``events``    the trace's events as flat arrays: roles, call/op/sync pairs, queue lengths, HTA's rounding
``graph``     one window's dependency graph: call-stack edges per CPU thread, GPU and sync edges
``longest``   the longest path through it, with networkx's tie order
``analysis``  the command: per step, the path's time by what bounds it, the top ops, the path itself
"""
