"""A small export of each schema generation with every kind of row (kernels on two devices, copies, a
memset, NVTX push/pop, start/end and marks, an NCCL domain, an unclosed range)."""

from helpers.nsys_builder import ExportBuilder

GENERATIONS = ["2022.4", "2026.2"]


def build_small(generation: str, path):
    b = ExportBuilder(generation)
    b.gpu(0, "NVIDIA H100 80GB HBM3", 132, 85_000_000_000, 9, 0)
    b.kernel(
        1_000,
        1_300,
        "void gemm_kernel<float>(float*)",
        short="gemm_kernel",
        grid=(2, 3, 4),
        block=(128, 2, 1),
        device=0,
        stream=7,
        pid=4242,
        tid=4243,
        launch_at=900,
    )
    b.kernel(2_000, 2_050, "elementwise_kernel", device=1, stream=13, pid=4242, launch_at=1_950)
    b.memcpy(3_000, 3_400, copy_kind=1, size=4096, pid=4242, launch_at=2_990)
    b.memcpy(3_500, 3_600, copy_kind=8, size=512, pid=4242)
    b.memset(3_700, 3_710, size=64, pid=4242)
    b.domain(1, "NCCL", pid=4242, tid=4242)
    b.push_pop(100, 5_000, "step", pid=4242, tid=4242, registered=True)
    b.push_pop(200, 2_500, "forward", pid=4242, tid=4242)
    b.push_pop(300, 1_000, "allreduce", pid=4242, tid=4242, domain_id=1)
    b.start_end(400, 4_000, "data", pid=4242, tid=4242, end_tid=4250)
    b.push_pop(6_000, None, "unclosed", pid=4242, tid=4242)
    b.mark(50, "a mark", pid=4242, tid=4242)
    return b.write(path)
