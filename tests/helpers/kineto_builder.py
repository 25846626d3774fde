"""Build small torch.profiler (Kineto) JSON traces with exactly known contents.

Times are given as the text to write (``"1712195495519689.047"``) or as integers, so a test controls
the exact digits a reader must turn into nanoseconds. The layout is Kineto's: one JSON object, each
event on its own lines, ``traceName`` after ``traceEvents``.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path


class KinetoBuilder:
    def __init__(
        self,
        rank: int | None = None,
        world_size: int | None = None,
        devices: int = 1,
        base_time_ns: int | None = None,
        old: bool = False,
    ):
        self.events: list[str] = []
        self.head: dict = {"schemaVersion": 1}
        self.tail: dict = {"traceName": "built.pt.trace.json"}
        self.old = old  # torch 1.8 categories and string tids
        if devices:
            self.head["deviceProperties"] = [
                {
                    "id": index,
                    "name": "NVIDIA H100 80GB HBM3",
                    "totalGlobalMem": 85_000_000_000,
                    "computeMajor": 9,
                    "computeMinor": 0,
                    "numSms": 132,
                }
                for index in range(devices)
            ]
        if rank is not None:
            self.head["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": world_size}
        if base_time_ns is not None:
            self.tail["baseTimeNanoseconds"] = base_time_ns

    def event(self, ph: str, cat: str, name: str, pid, tid, ts, dur, args: dict | None = None) -> KinetoBuilder:
        text = (
            f'{{\n    "ph": "{ph}", "cat": "{cat}", "name": {json.dumps(name)}, "pid": {json.dumps(pid)}, '
            f'"tid": {json.dumps(tid)},\n    "ts": {ts}, "dur": {dur}'
        )
        if args is not None:
            text += ',\n    "args": ' + json.dumps(args)
        self.events.append(text + "\n  }")
        return self

    def raw(self, text: str) -> KinetoBuilder:
        self.events.append(text)
        return self

    def launch(
        self, name: str, ts, dur, correlation: int, pid: int = 100, tid: int = 100, cat: str = "cuda_runtime"
    ) -> KinetoBuilder:
        cat = "Runtime" if self.old and cat == "cuda_runtime" else cat
        return self.event(
            "X", cat, name, pid, str(tid) if self.old else tid, ts, dur, {"cbid": 211, "correlation": correlation}
        )

    def kernel(
        self,
        name: str,
        ts,
        dur,
        correlation: int,
        device: int = 0,
        stream: int = 7,
        grid=(1, 1, 1),
        block=(128, 1, 1),
        resources: dict | None = None,
    ) -> KinetoBuilder:
        """A kernel; ``resources``: more of its args ("registers per thread", "shared memory", "est. achieved
        occupancy %")."""
        return self.event(
            "X",
            "Kernel" if self.old else "kernel",
            name,
            device,
            f"stream {stream}" if self.old else stream,
            ts,
            dur,
            {
                "queued": 0,
                "device": device,
                "context": 1,
                "stream": stream,
                "correlation": correlation,
                "grid": list(grid),
                "block": list(block),
                **(resources or {}),
            },
        )

    def operator(
        self,
        name: str,
        ts,
        dur,
        dims: list,
        types: list[str],
        concrete: list[str] | None = None,
        pid: int = 100,
        tid: int = 100,
        flops: int | None = None,
    ) -> KinetoBuilder:
        """A CPU operator recorded with record_shapes (its Input Dims, Input type, Concrete Inputs) and, with
        ``flops``, with_flops."""
        args = {"Input Dims": dims, "Input type": types, "Concrete Inputs": concrete or [""] * len(dims)}
        return self.event(
            "X", "cpu_op", name, pid, tid, ts, dur, args | ({"flops": flops} if flops is not None else {})
        )

    def python_call(
        self, name: str, ts, dur, python_id: int, parent: int | None, module: int | None = None, pid=100, tid=100
    ) -> KinetoBuilder:
        """A Python call recorded with with_stack (a python_function event: a root's parent id is null; an
        nn.Module's call has its "Python module id")."""
        args = {"Python parent id": parent, "Python id": python_id, "Ev Idx": python_id + 1000}
        if module is not None:
            args["Python module id"] = module
        return self.event("X", "python_function", name, pid, tid, ts, dur, args)

    def device_limits(self, **fields) -> KinetoBuilder:
        """More deviceProperties of every GPU (maxThreadsPerMultiprocessor=2048, ...)."""
        for device in self.head.get("deviceProperties", []):
            device.update(fields)
        return self

    def memcpy(
        self,
        ts,
        dur,
        correlation: int,
        size: int,
        device: int = 0,
        stream: int = 7,
        name: str = "Memcpy HtoD (Pageable -> Device)",
        bandwidth: float | None = None,
    ) -> KinetoBuilder:
        """A copy; ``bandwidth``: the GB/s the profiler recorded from its exact duration, if any."""
        args: dict[str, int | float] = {"device": device, "stream": stream, "correlation": correlation, "bytes": size}
        if bandwidth is not None:
            args["memory bandwidth (GB/s)"] = bandwidth
        return self.event("X", "gpu_memcpy", name, device, stream, ts, dur, args)

    def collective_kernel(
        self,
        name: str,
        ts,
        dur,
        correlation: int,
        elements: int,
        group: str = "0",
        group_size: int = 2,
        seq: int | None = None,
        operation: str = "allreduce",
        device: int = 0,
        stream: int = 20,
    ) -> KinetoBuilder:
        """An NCCL kernel carrying torch's record of its call, as newer torch annotates it: the operation, dtype
        Float, ``elements`` in and out, the process group's name and size, and its sequence number if given."""
        args = {
            "device": device,
            "stream": stream,
            "correlation": correlation,
            "Collective name": operation,
            "dtype": "Float",
            "In msg nelems": elements,
            "Out msg nelems": elements,
            "Group size": group_size,
            "Process Group Name": group,
            **({"Seq": seq} if seq is not None else {}),
        }
        return self.event("X", "kernel", name, device, stream, ts, dur, args)

    def memset(self, ts, dur, correlation: int, size: int, device: int = 0, stream: int = 7) -> KinetoBuilder:
        return self.event(
            "X",
            "gpu_memset",
            "Memset (Device)",
            device,
            stream,
            ts,
            dur,
            {"device": device, "stream": stream, "correlation": correlation, "bytes": size},
        )

    def sync(
        self,
        kind: str,
        ts,
        dur,
        correlation: int,
        stream: int = 7,
        device: int = 0,
        waits_on: tuple[int, int] | None = None,
    ) -> KinetoBuilder:
        """A cuda_sync event ("Stream Sync", "Context Sync", "Event Sync", "Stream Wait Event"); ``waits_on``:
        (the stream that recorded the event, the correlation id of its cudaEventRecord call)."""
        args = {
            "cuda_sync_kind": kind,
            "stream": 4294967295 if kind == "Context Sync" else stream,
            "correlation": correlation,
            "device": device,
            "context": 1,
        }
        if waits_on is not None:
            args |= {"wait_on_stream": waits_on[0], "wait_on_cuda_event_record_corr_id": waits_on[1]}
        return self.event("X", "cuda_sync", kind, device, stream if kind != "Context Sync" else -1, ts, dur, args)

    def annotation(
        self, name: str, ts, dur, pid: int = 100, tid: int = 100, cat: str = "user_annotation"
    ) -> KinetoBuilder:
        return self.event("X", cat, name, pid, tid, ts, dur, {"External id": 1})

    def flow(self, ts, flow_id: int) -> KinetoBuilder:
        self.events.append(
            f'{{"ph": "s", "id": {flow_id}, "pid": 100, "tid": 100, "ts": {ts}, "cat": "ac2g", "name": "ac2g"}}'
        )
        return self

    def names(self, what: str, pid, tid, name: str) -> KinetoBuilder:
        """A metadata event naming a process (``what`` "process_name", torch writes tid 0) or a thread
        ("thread_name")."""
        return self.raw(
            f'{{"name": "{what}", "ph": "M", "ts": 1, "pid": {json.dumps(pid)}, "tid": {json.dumps(tid)}, '
            f'"args": {{"name": {json.dumps(name)}}}}}'
        )

    def text(self) -> str:
        head = ",\n".join(f"  {json.dumps(key)}: {json.dumps(value)}" for key, value in self.head.items())
        tail = ",\n".join(f"  {json.dumps(key)}: {json.dumps(value)}" for key, value in self.tail.items())
        return "{\n" + head + ',\n  "traceEvents": [\n  ' + ",\n  ".join(self.events) + "\n  ],\n" + tail + "\n}\n"

    def write(self, path: Path, compress: bool = False) -> Path:
        data = self.text().encode()
        path.write_bytes(gzip.compress(data) if compress else data)
        return path
