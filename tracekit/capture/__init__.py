"""Capturing: a workload under a profiler, and the run folder it leaves (``tracekit.runs``).

``nsys``      the workload under ``nsys profile`` with an NVTX capture range; import and export
``watchdog``  nsys, its agent and the program: stopped by process id when they outlive the program
"""
