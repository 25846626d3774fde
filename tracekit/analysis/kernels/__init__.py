"""Which kernels ran and for how long.

``summary``     nsys's kernel summary (gpukernsum), per category, per range instance (``kernels``)
``columns``     the GPU-op columns each form of ``kernels`` reads (free of pandas: read ahead)
``types``       HolisticTraceAnalysis's kernel types (computation, communication, memory) and overlap
``bandwidth``   memory copies' and sets' bandwidth per direction and over time (``bandwidth``)
``categories``  kernel names into categories (matmul, attention, elementwise, ...), one rule list
"""
