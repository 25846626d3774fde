"""Build torch.cuda.memory._dump_snapshot-shaped pickles in code, with exactly known contents."""

from __future__ import annotations

import pickle
from pathlib import Path

ALLOCATOR = [
    {"filename": "??", "line": 0, "name": "torch::unwind::unwind()"},
    {
        "filename": "CUDACachingAllocator.cpp",
        "line": 0,
        "name": "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(unsigned long)",
    },
]


def stack(*python_frames: str) -> list[dict]:
    """An allocator stack topped by Python frames given as "path/file.py:line function" (innermost first)."""
    frames = list(ALLOCATOR)
    for text in python_frames:
        location, function = text.split(" ", 1)
        filename, line = location.rsplit(":", 1)
        frames.append({"filename": filename, "line": int(line), "name": function})
    return frames


MIB = 2**20


class SnapshotBuilder:
    def __init__(self, with_time: bool = True, devices: int = 1):
        self.with_time = with_time
        self.traces: list[list[dict]] = [[] for _ in range(devices)]
        self.segments: list[dict] = []
        self.annotations: list[dict] = []

    def _event(self, device: int, action: str, addr: int, size: int, time_us: int, frames: list[dict]) -> None:
        entry = {"action": action, "addr": addr, "size": size, "stream": 0, "frames": frames}
        if self.with_time:
            entry["time_us"] = time_us
        self.traces[device].append(entry)

    def alloc(self, addr: int, size: int, time_us: int, frames: list[dict] | None = None, device: int = 0) -> None:
        self._event(device, "alloc", addr, size, time_us, frames or [])

    def free(self, addr: int, size: int, time_us: int, device: int = 0, frames: list[dict] | None = None) -> None:
        """A free; ``frames``: where it was freed (torch records the stack of frees too)."""
        self._event(device, "free_requested", addr, size, time_us, frames or [])
        self._event(device, "free_completed", addr, size, time_us, frames or [])

    def segment_event(self, action: str, addr: int, size: int, time_us: int, device: int = 0) -> None:
        self._event(device, action, addr, size, time_us, [])

    def segment(self, address: int, total: int, blocks: list[tuple], device: int = 0) -> None:
        """blocks: (address, size, state[, frames]) at snapshot time."""
        rows = [
            {"address": b[0], "size": b[1], "requested_size": b[1], "state": b[2], "frames": b[3] if len(b) > 3 else []}
            for b in blocks
        ]
        active = sum(b["size"] for b in rows if b["state"].startswith("active"))
        self.segments.append(
            {
                "device": device,
                "address": address,
                "total_size": total,
                "allocated_size": active,
                "active_size": active,
                "requested_size": active,
                "stream": 0,
                "segment_type": "large",
                "segment_pool_id": (0, 0),
                "is_expandable": False,
                "frames": [],
                "blocks": rows,
            }
        )

    def annotate(self, name: str, start_us: int, end_us: int, device: int = 0) -> None:
        self.annotations += [
            {"stage": "START", "name": name, "device": device, "time_us": start_us},
            {"stage": "END", "name": name, "device": device, "time_us": end_us},
        ]

    def dump(self, path: str | Path) -> Path:
        data = {
            "segments": self.segments,
            "device_traces": self.traces,
            "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": ""},
            "external_annotations": self.annotations,
        }
        with open(path, "wb") as handle:
            pickle.dump(data, handle)
        return Path(path)


def two_snapshots(folder: Path) -> tuple[Path, Path]:
    """A small snapshot and one three times larger: an allocation live at the end (1 or 3 MiB) and a
    freed one twice its size, in one 64 MiB segment; for tests that run every command on two inputs."""
    paths = []
    for name, scale in (("small", 1), ("large", 3)):
        builder = SnapshotBuilder()
        builder.alloc(0x1000, scale * MIB, 100, stack("model/layers.py:39 forward"))
        builder.alloc(0x9000, 2 * scale * MIB, 200, stack("model/attention.py:12 softmax"))
        builder.free(0x9000, 2 * scale * MIB, 300)
        builder.segment(0x0, 64 * MIB, [(0x1000, scale * MIB, "active_allocated")])
        paths.append(builder.dump(folder / f"{name}.pickle"))
    return paths[0], paths[1]
