"""What to fix first: findings with their evidence, and the expert rules of Nsight Systems.

``advise``      the command: every rule's findings ranked, their evidence, and nsys's rules' tables
``many``        over a job's ranks: their findings together, the straggler, a row per rank
``steady_rules`` what is judged (the steady state, a window, the whole), the one-time costs apart, a cold start
``finding``     one finding (recoverable time, bound, fix, evidence), severity and ranking
``idle_rules``  GPU idle findings: blocking syncs, launch-bound stretches, host stalls
``causes``      what made the host late, from the ranges it was in: the cause that leads each fix
``copy_rules``  copy findings: pageable memory, synchronous copies and sets, copies on compute streams
``kernel_rules`` kernel findings: FP32 matmul on tensor-core GPUs, unfused optimizer steps, exposed communication
``communication_rules`` exposed communication with its cause (late rank, unbucketed sync, exchange, slow link)
``fusion_rules`` work a fused kernel would do in one pass: attention as matmul -> softmax -> matmul kernels
``precision_bound`` what moving FP32 GEMMs to the tensor cores gives back, bounded by the roofline
``memory_rules`` snapshot findings: out-of-memory errors, activations dominating the peak, fragmentation
``nsys_rules``  nsys analyze's rules (gpu-starv, gpu-low-util, cuda-sync-api, ...), as nsys defines them
``advise_command``  the command, declared
"""
