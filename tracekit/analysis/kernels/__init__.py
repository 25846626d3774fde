"""Which kernels ran and for how long.

``summary``     nsys's kernel summary (gpukernsum), per category, per range instance (``kernels``)
``columns``     the GPU-op columns each form of ``kernels`` reads (free of pandas: read ahead)
``types``       HolisticTraceAnalysis's kernel types (computation, communication, memory) and overlap
``bandwidth``   memory copies' and sets' bandwidth per direction and over time (``bandwidth``)
``sequences``   the kernel sequences a trace repeats, worth fusing (``sequences``)
``operator_sequences``  HolisticTraceAnalysis's frequent GPU op sequences per operator (``sequences`` with operator)
``sequence_keys``  sequences of names told apart without a loop per sequence
``categories``  kernel names into categories (matmul, attention, elementwise, ...), one rule list
``kernels_command``, ``sequences_command``, ``bandwidth_command``  the commands, declared
"""
