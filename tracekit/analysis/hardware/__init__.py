"""What the hardware can do, and what a kernel or an op asked of it: the measurements efficiency needs.

Pure functions of names, shapes and device properties (no Trace, no file): every question package may
use them (``efficiency`` computes achieved rates with them; ``kernels`` and ``ops`` show their columns).

``gpu_peaks``         dense peak FLOP/s per precision and unit, and memory bandwidth, of the GPUs users have
``kernel_precision``  a GEMM/convolution kernel's precision and unit (FP32 on CUDA cores, BF16 on tensor cores ...)
``precision_names``   its vocabulary (precisions, units, KernelPrecision) and the type spellings kernel names use
``precision_nvidia``  NVIDIA's library kernel-name families (cuBLAS, cuBLASLt, CUTLASS 2, cuDNN, XMMA, nvjet)
``precision_generated`` generated kernels' names (CUTLASS 3, flash attention, TensorRT, cuDNN attention, Triton)
``precision_amd``     AMD's kernel-name families (Tensile, hipBLASLt, Composable Kernel, MIOpen)
``collective_names`` a collective kernel's operation, element type, algorithm and protocol (NCCL, RCCL,
                      MSCCL); NCCL's bus-bandwidth factor
``link_bandwidths``   each GPU's fastest peer link (NVLink, PCIe) per direction: what bus bandwidth is held against
``occupancy``         theoretical occupancy from registers, shared memory and block size (CUDA's calculator)
``op_counts``         FLOPs and bytes of an operator from its recorded shapes and dtypes; its rules by family:
  ``op_count_args``       the recorded arguments read (dtypes, sizes, scalars; NVTX range names), bytes added up
  ``op_count_matmul``     products, einsum, convolutions
  ``op_count_attention``  scaled-dot-product attention, forward and backward, every entry point
  ``op_count_pointwise``  elementwise ops and reductions
  ``op_count_copies``     copies, fills, factories, views
  ``op_count_norms``      softmax and the normalizations
  ``op_count_lookups``    embeddings and losses
  ``op_count_optimizer``  foreach and fused optimizer steps
"""
