"""``tracekit report``: Markdown reports with pictures, built from the same Results as the commands.

``traces``   runs or traces -> reports/<name>/report.md (one section per input, a comparison of N)
``bench``    a ``tracekit bench --db`` results database -> reports/bench/report.md
``document`` the Markdown being written: tables through the one renderer, charts as PNG files
``comparison``  two or more inputs, each against the first: diff by category and kernel, compare
``declared`` a section for each command that declares one (``Command.report``), other packages' too
``why``      the "Why the GPU waits" section: steps, idle by cause, launch delays, syncs, overlap
``timeline_data``  report.html's timeline of a trace: phases, GPU ops by stream, idle gaps, steps, as columns
``host_lanes``  the timeline's host lanes (each thread's ranges, CPU ops and CUDA API calls by depth) and each op's launching thread
``findings_page``  advise's findings as report.html shows them: with their bound and evidence
"""
