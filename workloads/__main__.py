"""What `tracekit capture` runs under nsys: one benchmark configuration, its result as JSON.

    python -m workloads tiny --ctx 32 --warmup 2 --steps 3 --capture-range --result run-result.json

Exit status 0 when the configuration ran, 3 when it ran out of memory, 1 on any other failure; the
JSON result is written in every case.
"""

from __future__ import annotations

import argparse
import json
import sys

from tracekit.run_config import MODES, SIZES, RunConfig
from workloads.bench import DTYPES, result_record, run, summarize
from workloads.models import ATTENTION_KINDS

EXIT_OOM = 3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m workloads", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("model", choices=list(SIZES))
    parser.add_argument("--ctx", type=int, default=256)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--mode", choices=MODES, default="train")
    parser.add_argument("--dtype", choices=list(DTYPES), default="fp32")
    parser.add_argument("--compile", action="store_true")
    parser.add_argument("--tf32", action="store_true", help="allow TF32 for float32 matmuls and convolutions")
    parser.add_argument("--attention", choices=ATTENTION_KINDS, default="naive")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--device", default="auto")
    parser.add_argument(
        "--capture-range", action="store_true", help="wrap the measured steps in the NVTX range nsys is told to capture"
    )
    parser.add_argument("--memory", metavar="PATH", help="dump a CUDA memory snapshot of the measured steps here")
    parser.add_argument("--result", metavar="PATH", help="write the result (configuration, samples, summary) here")
    args = parser.parse_args(argv)
    config = RunConfig(
        args.model,
        args.ctx,
        args.batch,
        args.mode,
        args.dtype,
        args.compile,
        args.attention,
        args.warmup,
        args.steps,
        args.device,
        tf32=args.tf32,
    )  # the inverse of RunConfig.arguments()
    try:
        result = run(config, capture_range=args.capture_range, memory_snapshot=args.memory)
    except Exception as error:
        reason = f"{type(error).__name__}: {error}"
        print(f"error: {reason}", file=sys.stderr)
        if args.result:  # the result says why, so that whoever ran this blames the right cause
            with open(args.result, "w") as handle:
                json.dump({"status": "failed", "error": reason}, handle, indent=2)
        return 1
    record = {**result_record(result), "summary": summarize(result)}
    if args.result:
        with open(args.result, "w") as handle:
            json.dump(record, handle, indent=2, default=str)
    if result.status != "ok":
        print(f"{result.status}: {result.error}", file=sys.stderr)
        return EXIT_OOM if result.status == "oom" else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
