"""How close the GPU work ran to the hardware's limits (``tracekit efficiency``).

``roofline``    each GPU's peaks and the roofline time of a piece of work; kernels' theoretical occupancy
``work``        per GPU operation: FLOPs, bytes, precision, unit, roofline, and what is not known
``efficiency``  the command: groups by operator, kernel, phase or step
``efficiency_command`` its options and ``COMMAND``
``groups``      the table of any grouping: sums over group codes and the measures built on them
``grouping``    which group each GPU op counts in; phases' and steps' wall time and MFU
"""
