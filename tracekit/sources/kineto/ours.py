"""Files tracekit itself wrote in the torch.profiler (Chrome trace-event) format: ``tracekit timeline``'s.
They read as traces (that is their point), but in a folder of traces one holds the others again."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

# the thread_name arg of a lane tracekit's timeline made beside a thread or stream, for slices that cross on
# it (trace_events.track_lanes): the tid (or stream) the lane is beside, where the reader puts its slices back
LANE_OF = "lane of"


def written_by_timeline(path: Path) -> bool:
    """Whether ``path`` is a file ``tracekit timeline`` wrote (its header says so): in a folder of traces
    it holds the others again, so reading it too would count their work twice."""
    if not path.name.endswith((".json", ".json.gz")):
        return False
    try:
        if path.name.endswith(".gz"):
            with gzip.open(path, "rb") as handle:
                head = handle.read(4096)
        else:
            with open(path, "rb") as handle:
                head = handle.read(4096)
    except (OSError, EOFError):
        return False  # unreadable: the reader says why, in its own line
    return re.search(rb'"writer"\s*:\s*"tracekit timeline"', head) is not None
