"""Memory copies and sets with their memory kinds (``schema.COPIES``), from any trace.

An nsys export records the kinds as columns (its reader's ``copies`` table); torch.profiler writes them
into the op's name: "Memcpy HtoD (Pageable -> Device)", "Memset (Device)". ROCm traces say "Host",
which does not tell pageable from pinned: it reads as Unknown.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracekit.model.derived import per_trace
from tracekit.model.schema import COPIES, MEMORY_KINDS
from tracekit.model.trace import Trace

MEMCPY_NAME = r"^Memcpy (?P<direction>\w+) \((?P<src>[\w ]+?) -> (?P<dst>[\w ]+?)\)$"
MEMSET_NAME = r"^Memset \((?P<dst>[\w ]+?)\)$"


@per_trace
def copy_details(trace: Trace) -> pd.DataFrame:
    """Every copy and set of ``trace`` with its memory kinds, once per trace."""
    recorded = trace.optional("copies")
    if recorded is not None:
        return recorded
    ops = trace.columns(
        "gpu_ops", ("start", "end", "duration", "kind", "name", "device", "stream", "correlation_id", "pid", "bytes")
    )
    ops = ops.loc[ops["kind"].isin(["memcpy", "memset"]).to_numpy()].reset_index(drop=True)
    if ops.empty:
        return COPIES.empty()
    # parsed once per distinct name, then spread to the rows by the name's code
    used = ops["name"].cat.remove_unused_categories()
    categories = pd.Series(used.cat.categories.astype(str))
    rows = used.cat.codes.to_numpy()
    copy = categories.str.extract(MEMCPY_NAME).iloc[rows].reset_index(drop=True)
    sets = categories.str.extract(MEMSET_NAME).iloc[rows].reset_index(drop=True)
    kind = ops["kind"].astype(str).to_numpy()
    dst = copy["dst"].where(kind == "memcpy", sets["dst"])
    return pd.DataFrame(
        {
            "kind": pd.Categorical(kind, categories=["memcpy", "memset"]),
            "start": ops["start"].to_numpy(),
            "end": ops["end"].to_numpy(),
            "duration": ops["duration"].to_numpy(),
            "bytes": ops["bytes"].to_numpy(),
            "pid": ops["pid"].to_numpy(np.int64),
            "device": ops["device"].to_numpy(),
            "context": np.full(len(ops), -1, dtype=np.int64),
            "stream": ops["stream"].to_numpy(),
            "correlation_id": ops["correlation_id"].to_numpy(),
            "direction": pd.Categorical(
                copy["direction"].where(kind == "memcpy", "").fillna("Unknown").to_numpy(dtype=object)
            ),
            "src_kind": _memory_kinds(copy["src"].where(kind == "memcpy")),
            "dst_kind": _memory_kinds(dst),
            "same_device": np.zeros(len(ops), dtype=bool),
        }
    )


def _memory_kinds(names: pd.Series) -> pd.Categorical:
    """torch.profiler's kind names as nsys's (an unknown or missing one: Unknown)."""
    known = names.where(names.isin(MEMORY_KINDS), "Unknown")
    return pd.Categorical(known.to_numpy(dtype=object), categories=list(MEMORY_KINDS))
