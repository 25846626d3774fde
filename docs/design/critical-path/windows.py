import sys
sys.path.insert(0, "/tmp/cpa")
import reimpl
K = "/work/shared/kineto/"
for f, ann, inst in [("a100_alexnet_cuda_sync.json.gz", "", 0), ("a100_alexnet_cuda_sync.json.gz", "measure|forward", 0),
                     ("a100_ddp_rank0of2_nccl.json.gz", "ProfilerStep", 0), ("a100_ddp_rank0of2_nccl.json.gz", "ProfilerStep", 1),
                     ("gp100_steps_gpu_user_annotation.json.gz", "", 0), ("h100_qwen0.5b_inference.json.gz", "ProfilerStep", 0),
                     ("mi250_rocm6.2_toy.json.gz", "ProfilerStep", 0), ("v100_resnet50_torch1.8.pt.trace.json.gz", "ProfilerStep", 0),
                     ("v100_resnet_torch2.3_ns_precision.pt.trace.json.gz", "ProfilerStep", 0), ("v100_resnet_torch2.3_ns_precision.pt.trace.json.gz", "ProfilerStep", 1),
                     ("v100_dlrm_8ranks/rank0.pt.trace.json", "ProfilerStep", 0)]:
    full, syms = reimpl.load_trace(K + f)
    filt = sum("ProfilerStep" in s for s in syms) >= 2
    if ann:
        a = full[full.name.isin({s for s in syms if ann in s})]
        sel = a.iloc[inst:inst + 1]
        print(f, repr(ann), inst, "rows kept", len(full), "step-filter", filt, "| annotation rows (row order):",
              [(r.name, r.cat, int(r.ts), float(r.dur)) for r in a.itertuples()][:6], "-> window", int(sel.ts.min()), float((sel.ts + sel.dur).max()))
    else:
        print(f, repr(ann), "rows kept", len(full), "step-filter", filt, "window", full.ts.min(), full.end_unaligned.max())
