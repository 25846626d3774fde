"""One training step built with known numbers (an nsys export of ExportBuilder): kernel names of each
category and ``build_step``, which several test modules share."""

from helpers.nsys_builder import ExportBuilder

GEMM = "ampere_sgemm_128x64_tn"
SOFTMAX = "void softmax_warp_forward<float>()"
ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>()"
FILL = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>()"
ADAM = "void multi_tensor_apply_kernel<FusedAdamMathFunctor<float>>()"
SUM = "void at::native::reduce_kernel<512, 1>()"


def build_step(b: ExportBuilder, offset: int = 0, main: int = 100, autograd: int = 101) -> None:
    t = offset
    b.push_pop(t + 0, t + 1000, "step", tid=main)
    b.push_pop(t + 10, t + 400, "forward", tid=main)
    b.kernel(t + 50, t + 150, GEMM, tid=main, launch_at=t + 20)
    b.kernel(t + 150, t + 190, SOFTMAX, tid=main, launch_at=t + 30)
    b.push_pop(t + 100, t + 300, "attention", tid=main)
    b.kernel(t + 200, t + 220, SOFTMAX, tid=main, launch_at=t + 110)
    b.push_pop(t + 400, t + 800, "backward", tid=main)
    b.kernel(t + 410, t + 420, FILL, tid=main, launch_at=t + 410)
    b.kernel(t + 500, t + 700, GEMM, tid=autograd, launch_at=t + 450)
    b.kernel(t + 700, t + 750, ADD, tid=autograd, launch_at=t + 460)
    b.push_pop(t + 800, t + 950, "optimizer", tid=main)
    b.kernel(t + 820, t + 850, ADAM, tid=main, launch_at=t + 810)
