"""Every distinct kernel name in ../shared's real traces, with its category (none when ../shared is absent)."""

from __future__ import annotations

import gzip
import json
import sqlite3

from helpers.paths import shared_export_paths, shared_kineto_paths
from tracekit.analysis.primitives.categories import categorize_name


def shared_kernel_names() -> dict[str, str]:
    """name -> category, of every kernel in ../shared (nsys exports' demangled names, torch.profiler kernel
    events)."""
    names: set[str] = set()
    for path in shared_export_paths():
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as connection:
            query = "SELECT DISTINCT value FROM StringIds WHERE id IN (SELECT demangledName FROM CUPTI_ACTIVITY_KIND_KERNEL)"
            names.update(value for (value,) in connection.execute(query))
    for path in shared_kineto_paths():
        with gzip.open(path, "rt") if path.suffix == ".gz" else open(path) as handle:
            events = json.load(handle)["traceEvents"]
        names.update(event["name"] for event in events if event.get("cat") in ("kernel", "Kernel"))
    return {name: categorize_name(name) for name in names}
