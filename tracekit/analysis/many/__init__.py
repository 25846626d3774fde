"""Many inputs: each input mapped to a small Part, Parts merged exactly, on a pool or Dask; and the
analyses that compare traces.

``inputs``       Part, Failure and the accumulator that folds Parts into one Result
``tables``       ``kernels``, ``ranges`` and ``breakdown`` over many inputs: parts and mergers
``efficiency``   ``efficiency`` over many inputs: each one's group sums, added
``collectives``  ``collectives`` over one trace or many: each one's collective kernels, matched across ranks
``merge_stats``  exact merges of counts, totals, min, max, mean and stddev; medians exact or sketched
``pool``         reading the inputs on local processes or Dask
``dask_client``  connecting to a Dask scheduler with a bounded handshake
``ranks``        ranks of a job side by side: steps, busy, communication, stragglers (``ranks``)
``stragglers``   the ranks the others wait for, as HolisticTraceAnalysis's get_potential_stragglers
``compare``      many runs by phase and category, ordered by a config field (``compare``)
``diff``         where GPU time moved from A to B (``diff``)
``verdict``      faster, slower or the same, with a noise band from the steps' spread; the CI gate
``ranks_command``, ``compare_command``, ``diff_command``  the commands, declared
"""
