"""Build a large torch.profiler trace by replicating a real one (benchmark input, not committed).

Each copy of the source's events is shifted in time past the previous copy, gets fresh correlation
ids, External ids and flow ids, and its ``ProfilerStep#N`` annotations are renumbered, so the result
is one consistent, longer trace: every analysis gives each copy the answer of the original.
Timestamps keep their exact text (decimal arithmetic), so a nanosecond-precision source stays one.

    python benchmarks/make_kineto_trace.py \
        ../shared/kineto/v100_resnet_torch2.3_ns_precision.pt.trace.json.gz \
        benchmarks/data/kineto_200k.json --kernels 200000
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import time
from decimal import Decimal
from pathlib import Path

STEP = re.compile(r"^ProfilerStep#(\d+)$")
ID_ARGS = ("correlation", "External id", "external id")
KERNEL_CATEGORIES = {"kernel", "Kernel"}
GAP_US = Decimal(1000)


def _load(source: Path) -> dict:
    opener = gzip.open if source.suffix == ".gz" else open
    with opener(source, "rb") as handle:
        return json.loads(handle.read(), parse_float=Decimal)  # exact decimal timestamps


def kernel_count(source: Path) -> int:
    """The kernels of ``source``."""
    return sum(event.get("cat") in KERNEL_CATEGORIES for event in _load(source)["traceEvents"])


def span_of(source: Path) -> Decimal:
    """The time one copy of ``source`` takes, gap included (us)."""
    return _span(_load(source)["traceEvents"])[0]


def _span(events: list[dict]) -> tuple[Decimal, dict[str, int], int, int]:
    """Time span of one copy (µs, plus a gap), the id step per id argument, the flow id step and the
    step-number step."""
    timed = [event for event in events if "ts" in event]
    first = min(Decimal(event["ts"]) for event in timed)
    last = max(Decimal(event["ts"]) + Decimal(event.get("dur", 0)) for event in timed)
    id_steps = {}
    for arg in ID_ARGS:
        values = [event["args"][arg] for event in events if isinstance(event.get("args", {}).get(arg), int)]
        id_steps[arg] = max(values, default=0) + 1
    flow_step = max((event["id"] for event in events if isinstance(event.get("id"), int)), default=0) + 1
    steps = [int(match.group(1)) for event in events if (match := STEP.match(str(event.get("name", ""))))]
    step_step = (max(steps) - min(steps) + 1) if steps else 0
    return last - first + GAP_US, id_steps, flow_step, step_step


def _shifted(event: dict, copy: int, span: Decimal, id_steps: dict, flow_step: int, step_step: int) -> dict:
    event = dict(event)
    if copy:
        if "ts" in event and event.get("ph") != "M":
            event["ts"] = Decimal(event["ts"]) + span * copy
        if isinstance(event.get("id"), int):
            event["id"] += flow_step * copy
        if isinstance(event.get("args"), dict):
            args = dict(event["args"])
            for arg, step in id_steps.items():
                if isinstance(args.get(arg), int) and args[arg] >= 0:
                    args[arg] += step * copy
            event["args"] = args
        match = STEP.match(str(event.get("name", "")))
        if match and step_step:
            event["name"] = f"ProfilerStep#{int(match.group(1)) + step_step * copy}"
    return event


def _dump(value) -> str:
    """JSON text with decimals written exactly as they are (json.dumps cannot write a Decimal)."""
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(key)}: {_dump(item)}" for key, item in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_dump(item) for item in value) + "]"
    return json.dumps(value)


def replicate(source: Path, target: Path, kernels: int, span_us: Decimal | None = None) -> dict:
    """``span_us``: the shift between copies (default: the source's span and a gap); the ranks of one job
    replicated with one shift stay aligned in time."""
    document = _load(source)
    events = document["traceEvents"]
    base = sum(event.get("cat") in KERNEL_CATEGORIES for event in events)
    copies = max(1, -(-kernels // base))
    span, id_steps, flow_step, step_step = _span(events)
    span = span_us if span_us is not None else span
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    with open(partial, "w") as out:
        out.write("{\n")
        keys = list(document)
        for position, key in enumerate(keys):
            out.write(f"  {json.dumps(key)}: ")
            if key == "traceEvents":
                out.write("[\n")
                first = True
                for copy in range(copies):
                    for event in events:
                        out.write(
                            ("" if first else ",\n")
                            + "  "
                            + _dump(_shifted(event, copy, span, id_steps, flow_step, step_step))
                        )
                        first = False
                out.write("\n  ]")
            else:
                out.write(_dump(document[key]))
            out.write(",\n" if position < len(keys) - 1 else "\n")
        out.write("}\n")
    os.replace(partial, target)
    return {"copies": copies, "kernels": base * copies, "events": len(events) * copies, "bytes": target.stat().st_size}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("source", type=Path)
    parser.add_argument("target", type=Path)
    parser.add_argument("--kernels", type=int, default=200_000)
    args = parser.parse_args()
    started = time.perf_counter()
    facts = replicate(args.source, args.target, args.kernels)
    print(
        f"{args.target}: {facts['kernels']:,} kernels, {facts['events']:,} events, "
        f"{facts['bytes'] / 1e6:,.0f} MB, {facts['copies']} copies, {time.perf_counter() - started:.0f} s"
    )


if __name__ == "__main__":
    main()
