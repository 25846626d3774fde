"""NVTX ranges (or record_function annotations) and the GPU work launched inside them.

``summary``      nsys's range summary (nvtxsum) with GPU columns, a tree, the children of a range
``gpu_side``     each range's GPU time on the GPU side: the union of its ops, torch.profiler's GPU-side spans
``breakdown``    kernel time by phase and category, busy/idle per GPU, copies (``breakdown``)
``steps``        one row per training step (``steps``), and the step ranges other analyses use
``ranges_command``, ``breakdown_command``, ``steps_command``  the commands, declared
"""
