"""Capturing: a workload under a profiler, and the run folder it leaves (``tracekit.runs``).

``nsys``            the workload under ``nsys profile`` with an NVTX capture range; import and export
``command``         any program (``-- COMMAND``) under nsys or torch.profiler, into a run folder
``launch``          the built-in workload started as ``python -m workloads`` would, this installation's
``program_launch``  a user's Python program (script or module) started with tracekit's hooks
``run_folder``      the run folder while it is written: hidden, then moved into place
``process_group``   the program's whole process tree, stopped together on a signal
``watchdog``        nsys, its agent and the program: stopped by process id when they outlive the program
"""
