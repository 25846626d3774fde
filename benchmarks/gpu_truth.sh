#!/usr/bin/env bash
# GPU truth (issue 32): the seed workflow on one CUDA GPU, its outputs kept in one folder of at most
# 8 files (benchmarks/GPU_RESULTS.md says what came of it).
#
#   benchmarks/gpu_truth.sh OUT          on the GPU machine, in the repository root (~5 minutes)
#   benchmarks/gpu_truth.sh OUT --cpu    the rehearsal: the same steps on the CPU at tiny sizes
#
# Python packages the GPU image lacks travel as wheels: with WHEELS=DIR (default .whl, when it
# exists) they are installed into a private folder first. tracekit runs from this checkout
# (python3 -m tracekit.cli), nothing is installed into the machine's Python.
#
# ONLY=GLOB runs the steps whose names match (ONLY='attention_*' reruns the attention table alone).
#
# Each step has its own time limit and the whole run a deadline (DEADLINE_S, default 330 s), so a slow
# or failing step costs only itself. A step's output, errors and exit status go to OUT/work/; at the
# end OUT holds: outputs.tar.gz (every step's output, run.json files, the environment), the small
# run's torch.profiler trace and memory snapshot (gzip), and the xl run's trace when it is under 16 MiB.
# Only what needs the GPU runs here: the small run's tables come from its files on any machine.
set -u
out=${1:?usage: gpu_truth.sh OUT [--cpu]}
mode=${2:-gpu}
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$out/work
runs=$work/traces
mkdir -p "$work" "$runs"
started=$SECONDS
deadline=${DEADLINE_S:-330}
python=${PYTHON:-python3}

wheels=${WHEELS:-.whl}
if [ -d "$wheels" ] && ls "$wheels"/*.whl >/dev/null 2>&1; then
  site=$(mktemp -d)
  "$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" \
    "$wheels"/*.whl >"$work/wheels.txt" 2>&1 || { echo "wheels did not install: $(tail -n 3 "$work/wheels.txt")"; }
  export PYTHONPATH=$site:$PWD
else
  export PYTHONPATH=$PWD
fi
export PYTHONUNBUFFERED=1 MPLBACKEND=Agg

# step NAME LIMIT_S ARGS...: `tracekit ARGS` with the smaller of its limit and the time left; one status line.
step() {
  local name=$1 limit=$2
  shift 2
  # shellcheck disable=SC2254  # ONLY is a glob on purpose
  case $name in ${ONLY:-*}) ;; *) return 0 ;; esac
  local left=$((deadline - (SECONDS - started)))
  if [ "$left" -lt 15 ]; then
    echo "skip  $name (deadline: ${left}s left)" | tee -a "$work/steps.txt"
    return
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  local begun=$SECONDS
  timeout -k 5 "$limit" "$python" -m tracekit.cli "$@" >"$work/$name.txt" 2>"$work/$name.err"
  local status=$?
  echo "rc=$status $((SECONDS - begun))s  $name: tracekit $*" | tee -a "$work/steps.txt"
  [ "$status" -ne 0 ] && tail -n 3 "$work/$name.err"
  return 0
}

if [ "$mode" = "--cpu" ]; then
  device=cpu small=tiny big=tiny models=(tiny) ctx=32 steps=2
  points=("--head-dim 16 --seq 64 128" "--head-dim 32 --seq 64")
  passes=3
  compiled_points=(--head-dim 16 --seq 64 --passes 2)
  compile_backend=aot_eager  # inductor takes ~20 s a shape on a CPU
else
  device=cuda small=small big=xl models=(small medium large) ctx=256 steps=3
  # The published table's points (head dim x lengths), and its compiled ones.
  points=("--head-dim 16 --seq 256 4096 16384" "--head-dim 64 --seq 1024 8192" "--head-dim 128 --seq 4096 16384")
  passes=100
  compiled_points=(--head-dim 16 128 --seq 16384 --passes 100)
  compile_backend=inductor
fi

{
  date -u +%FT%TZ
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1 || true
  "$python" - <<'EOF'
import platform, torch
print("python", platform.python_version(), "torch", torch.__version__, "cuda", torch.version.cuda,
      "cudnn", torch.backends.cudnn.version() if torch.cuda.is_available() else None)
if torch.cuda.is_available():
    p = torch.cuda.get_device_properties(0)
    print("device", p.name, "sms", p.multi_processor_count, "memory MiB", p.total_memory // 2**20)
EOF
  "$python" -c "from importlib.metadata import version as v; print(*(f'{n} {v(n)}' for n in ('pandas', 'numpy', 'msgspec', 'click')))"
} >"$work/environment.txt" 2>&1
cat "$work/environment.txt"

# 1. Attention against the published table: eager naive and explicit at its points, fp32, batch 8.
for point in "${points[@]}"; do
  dims=${point#--head-dim }
  # shellcheck disable=SC2086  # a point is its options, split on purpose
  step "attention_d${dims%% *}" 100 bench attention --impl naive explicit $point --passes "$passes" --batch 8 \
    --dtype fp32 --device "$device" --format csv
done
# 2. The small model's train step under torch.profiler with its memory snapshot (kept as test data).
step capture_small 150 capture "$small" --ctx "$ctx" --steps "$steps" --warmup 5 --profiler torch --memory \
  --device "$device" --out "$runs" --name small
# (Its tables are computed from these files on any machine: tests/data/gpu/, benchmarks/GPU_RESULTS.md.)
# 3. xl under torch.profiler.
step capture_xl 180 capture "$big" --ctx "$ctx" --steps "$steps" --warmup 3 --profiler torch \
  --device "$device" --out "$runs" --name xl
for command in "kernels --by category" "breakdown" "steps" "idle" "efficiency --by op" "efficiency --by step"; do
  step "xl_${command// /_}" 60 $command "$runs/xl"
done
# (Issue 40's check, written down: the captures record operators' shapes, so `efficiency --by step` on xl
# gives each step's FLOPs and MFU; its TFLOP/s over the step's wall time should be within 10 % of step 4's
# fp32 xl figure, which counts 6 x parameters x tokens plus attention; its aten::mm/addmm/bmm rows should read
# FP32 on the CUDA cores, or TF32 on the tensor cores where allow_tf32 is set.)
# 4. Models end to end, fp32 and bf16 (MFU against the GPU's data-sheet peak).
step models 180 bench "${models[@]}" --ctx "$ctx" --mode train --dtype fp32 bf16 --device "$device" --format csv
# 5. Compiled: attention at the table's compiled points, and the small model in bf16.
TRACEKIT_COMPILE_BACKEND=$compile_backend step attention_compiled 150 bench attention --impl explicit --compile \
  "${compiled_points[@]}" --batch 8 --dtype fp32 --device "$device" --format csv
TRACEKIT_COMPILE_BACKEND=$compile_backend step models_compiled 150 bench "$small" --ctx "$ctx" --mode train \
  --dtype bf16 --compile --device "$device" --format csv

# Pack: the small run's files as test data, the rest in one archive.
[ -f "$runs/small/trace.pt.trace.json.gz" ] && cp "$runs/small/trace.pt.trace.json.gz" "$out/small.pt.trace.json.gz"
[ -f "$runs/small/memory.pickle" ] && gzip -9 -c "$runs/small/memory.pickle" >"$out/small_memory.pickle.gz"
xl_trace=$runs/xl/trace.pt.trace.json.gz
if [ -f "$xl_trace" ] && [ "$(stat -c %s "$xl_trace")" -lt $((16 * 1024 * 1024)) ]; then
  cp "$xl_trace" "$out/xl.pt.trace.json.gz"
fi
for run in small xl; do
  [ -f "$runs/$run/run.json" ] && cp "$runs/$run/run.json" "$work/${run}_run.json"
  [ -f "$runs/$run/program.log" ] && cp "$runs/$run/program.log" "$work/${run}_program.log"
done
rm -rf "$runs"
tar -czf "$out/outputs.tar.gz" -C "$out" work && rm -rf "$work"
ls -la "$out"
echo "done in $((SECONDS - started)) s"
