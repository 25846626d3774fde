"""The primitives every question is built from: joins, interval algebra, the step window, op classes.

A question package (``kernels``, ``ranges``, ``waits``, ``critical_path``, ``memory``) imports these and
never another question; ``advice`` and ``many`` sit above the questions. Nothing here imports a
question package (import-linter's contracts in pyproject.toml check both).

``joins``          the op-launch join: each GPU op (or sync) to the call that launched it, one ``CallIndex``
``attribution``    which GPU ops each range launched (any thread of its process, or its own)
``selection``      range specs against a Trace: read only what they can match, nested, matched once
``covering``       the innermost range of a thread that covers a stretch of its time
``keyed_times``    times of many groups in one sorted array (a searchsorted per lookup, no loop)
``intervals``      interval algebra: unions, reductions over segments, peaks of a step function
``phases``         the phases of a trace: as given, or forward/backward/optimizer found by their range names
``step_window``    the trace's steps (ProfilerStep#N, step ranges) and HTA's step window
``hta``            reading times and call names as HolisticTraceAnalysis does (its rounding, its queued calls)
``op_selection``   which GPU ops a command reads (kernels or all) and where each form of a name is
``busy``           busy, span and idle time per GPU and for "any GPU busy"
``kernel_types``   HolisticTraceAnalysis's kernel types (computation, communication, memory) and overlap
``categories``     kernel names into categories (matmul, attention, elementwise, ...), one rule list
``attention_patterns`` attention run as separate kernels (matmul -> softmax -> matmul): counted as attention
``sequence_keys``  sequences of names told apart without a loop per sequence
``copies``         memory copies and sets with their memory kinds, from any trace
``kernel_hardware`` each kernel's precision and unit (by its name) and theoretical occupancy
``one_time``       what a trace does once: setup, context creation, module loading, library setup, autotuning,
                   compilation, a communicator's first collective
``one_time_names`` the kind of one-time cost a range's or an API call's name says
``steady_state``   the stretch that repeats (steps after warm-up, repeated ranges, after the start-up), or none
``trace_window``   a stretch of a trace as a trace of its own (its calls, the GPU work they launched, ranges)
``device_gpus``    which GPU each device of a trace is: its peaks, or why unknown
``operators``      what each CPU operator asked of the GPU (FLOPs, bytes from its recorded inputs), its kernels
"""
