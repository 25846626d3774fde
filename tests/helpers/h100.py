"""An H100 SXM as torch.profiler describes it, and one of its BF16 cuBLAS GEMM kernels, for built traces."""

H100_LIMITS = {
    "maxThreadsPerMultiprocessor": 2048,
    "maxThreadsPerBlock": 1024,
    "regsPerBlock": 65536,
    "regsPerMultiprocessor": 65536,
    "warpSize": 32,
    "sharedMemPerBlock": 49152,
    "sharedMemPerMultiprocessor": 233472,
    "sharedMemPerBlockOptin": 232448,
}
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas"
BF16 = "c10::BFloat16"  # torch.profiler's name of the dtype
# H100 SXM: BF16 dense tensor-core peak 989.4 TFLOP/s (the whitepaper's 1,978.9 with sparsity, halved), 3.35 TB/s
PEAK, BANDWIDTH = 989.4e12, 3.35e12
