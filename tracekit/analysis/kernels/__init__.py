"""Which kernels ran and for how long.

``summary``     nsys's kernel summary (gpukernsum), per category, per range instance (``kernels``)
``columns``     the GPU-op columns each form of ``kernels`` reads (free of pandas: read ahead)
``bandwidth``   memory copies' and sets' bandwidth per direction and over time (``bandwidth``)
``sequences``   the kernel sequences a trace repeats, worth fusing (``sequences``)
``operator_sequences``  HolisticTraceAnalysis's frequent GPU op sequences per operator (``sequences`` with operator)
``kernels_command``, ``sequences_command``, ``bandwidth_command``  the commands, declared
"""
