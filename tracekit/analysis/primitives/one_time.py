"""What a trace does once: the costs of starting up that a steady state never pays again.

Each found on the host, as an interval (ns) with its kind:
- setup ranges: CPU ranges whose name says setup (``init_model``, ``setup``, ``warmup``, ``load_weights``,
  ``compile``, ``build_model``, ...; a name is cut into words at ``_``, ``.``, ``:``, spaces and case);
- context creation: a process's first CUDA API call when it takes 50 ms or more (the driver creates the
  context inside whichever call comes first: a ``cudaMalloc``, a ``cudaFree(0)``);
- module loading: the driver's module and library loads and unloads (``cuModuleLoad*``, ``cuLibraryLoad*``,
  ``cuLibraryUnload`` ...), and the first launch of a kernel when it takes 1 ms or more and 20 times the
  median of the launches that were not a kernel's first (CUDA's lazy loading loads the module then);
- library and communicator setup: ``cudnnCreate``, ``cublasCreate``, ``ncclCommInitRank`` and the like,
  as API calls or ranges.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from tracekit.analysis.primitives.joins import op_launches
from tracekit.model.derived import per_trace
from tracekit.model.trace import Trace

SETUP_WORDS = {
    "init",
    "initialize",
    "initialise",
    "initialization",
    "setup",
    "warmup",
    "compile",
    "compilation",
    "teardown",
    "cleanup",
}
SETUP_PAIRS = {("warm", "up"), ("set", "up"), ("load", "model"), ("load", "weights"), ("load", "checkpoint")}
SETUP_PAIRS |= {("build", "model"), ("create", "model"), ("model", "init"), ("tear", "down")}
LIBRARY_SETUP = re.compile(
    r"^(cudnnCreate|cublasCreate|cublasLtCreate|cusparseCreate|cufftPlan|ncclCommInit|ncclCommSplit|"
    r"ncclCommInitRank|ncclCommInitAll|nccl:new_group|ProcessGroupNCCL)"
)
MODULE_CALLS = re.compile(r"^(cuModuleLoad|cuModuleUnload|cuLibraryLoad|cuLibraryUnload|cudaDeviceReset)")
SETUP_NAME_LIMIT = 64  # characters: a setup range is named by a person
CONTEXT_NS = 50_000_000  # a first call this long created the context
FIRST_LAUNCH_NS = 1_000_000
FIRST_LAUNCH_FACTOR = 20
KINDS = ("setup range", "context creation", "module loading", "library setup")
COLUMNS = ["kind", "what", "start", "end", "pid", "tid"]


@per_trace
def one_time_costs(trace: Trace) -> pd.DataFrame:
    """The one-time costs of ``trace`` (``COLUMNS``; start and end in ns), by start."""
    parts = [_setup_ranges(trace), _calls(trace), _first_launches(trace)]
    found = pd.concat([part for part in parts if len(part)], ignore_index=True) if any(len(p) for p in parts) else None
    if found is None:
        return pd.DataFrame({column: [] for column in COLUMNS})
    return found.sort_values("start", kind="stable").reset_index(drop=True)


def is_setup_name(name: str) -> bool:
    """Whether a range's name says setup (see the module): "init_model", "Warm-up", "loadWeights"; a long
    or structured name (a call's record: "__init__" of a module, a dict of markers) never does."""
    if len(name) > SETUP_NAME_LIMIT or any(sign in name for sign in "{}[]()/'\"=") or name.startswith("__"):
        return False
    words = [word.lower() for word in re.findall(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+", name.split("(")[0])]
    if any(word in SETUP_WORDS for word in words):
        return True
    return any(pair in SETUP_PAIRS for pair in zip(words, words[1:]))


def _setup_ranges(trace: Trace) -> pd.DataFrame:
    ranges = trace.ranges
    if ranges.empty:
        return pd.DataFrame()
    names = ranges["name"]
    categories = [str(name) for name in names.cat.categories]
    setup = np.asarray([is_setup_name(name) for name in categories], dtype=bool)
    library = np.asarray([LIBRARY_SETUP.match(name) is not None for name in categories], dtype=bool)
    codes = names.cat.codes.to_numpy()
    cpu = ranges["domain"].astype(str).to_numpy() != "gpu"
    chosen_setup = np.append(setup, False)[codes] & cpu
    chosen_library = np.append(library, False)[codes] & cpu & ~chosen_setup
    # a setup range inside another one is counted with it: the outermost only
    frame = ranges.loc[chosen_setup | chosen_library]
    kind = np.where(chosen_setup[chosen_setup | chosen_library], "setup range", "library setup")
    table = pd.DataFrame(
        {
            "kind": kind,
            "what": frame["name"].astype(str).to_numpy(),
            "start": frame["start"].to_numpy(),
            "end": frame["end"].to_numpy(),
            "pid": frame["pid"].to_numpy(),
            "tid": frame["tid"].to_numpy(),
        }
    )
    return _outermost(table)


def _calls(trace: Trace) -> pd.DataFrame:
    calls = trace.launches
    if calls.empty:
        return pd.DataFrame()
    names = calls["name"].astype("category")
    categories = [str(name) for name in names.cat.categories]
    codes = names.cat.codes.to_numpy()
    module = np.append([MODULE_CALLS.match(name) is not None for name in categories], False)[codes]
    library = np.append([LIBRARY_SETUP.match(name) is not None for name in categories], False)[codes]
    start, end = calls["start"].to_numpy(), calls["end"].to_numpy()
    first = np.zeros(len(calls), dtype=bool)
    first[calls.groupby("pid", sort=False)["start"].idxmin().to_numpy()] = True  # each process's first call
    context = first & (end - start >= CONTEXT_NS)
    chosen = module | library | context
    kind = np.where(context, "context creation", np.where(module, "module loading", "library setup"))[chosen]
    what = np.asarray(
        [
            f"{name} (the process's first CUDA call: the context was created in it)"
            if kind_ == "context creation"
            else name
            for name, kind_ in zip(calls["name"].astype(str).to_numpy()[chosen], kind)
        ],
        dtype=object,
    )
    return pd.DataFrame(
        {
            "kind": kind,
            "what": what,
            "start": start[chosen],
            "end": end[chosen],
            "pid": calls["pid"].to_numpy()[chosen],
            "tid": calls["tid"].to_numpy()[chosen],
        }
    )


def _first_launches(trace: Trace) -> pd.DataFrame:
    """The first launch of each kernel name when it is long (lazy module loading)."""
    ops = trace.gpu_ops
    launches = op_launches(trace)
    kernel = (ops["kind"] == "kernel").to_numpy() & launches.found
    if not kernel.any():
        return pd.DataFrame()
    rows = np.flatnonzero(kernel)
    took = launches.end[rows] - launches.start[rows]
    codes = ops["name"].cat.codes.to_numpy()[rows]
    order = np.lexsort((launches.start[rows], codes))
    first = np.ones(len(order), dtype=bool)
    first[1:] = codes[order][1:] != codes[order][:-1]
    firsts = order[first]
    # the usual launch: of the launches that were not a kernel's first (all of them when every one was)
    later = took[order[~first]]
    median = float(np.median(later if len(later) else took))
    long = took[firsts] >= max(FIRST_LAUNCH_NS, FIRST_LAUNCH_FACTOR * median)
    picked = rows[firsts[long]]
    names = (ops["short_name"] if "short_name" in ops else ops["name"]).astype("category")
    labels = np.append(np.asarray(names.cat.categories, dtype=object), "?")[names.cat.codes.to_numpy()[picked]]
    return pd.DataFrame(
        {
            "kind": "module loading",
            "what": [f"first launch of {name}" for name in labels],
            "start": launches.start[picked],
            "end": launches.end[picked],
            "pid": launches.pid[picked],
            "tid": launches.tid[picked],
        }
    ).drop_duplicates(["start", "tid"])  # a call launching several kernels is one


def _outermost(table: pd.DataFrame) -> pd.DataFrame:
    """The rows not inside another row of the same thread."""
    if table.empty:
        return table
    table = table.sort_values(["pid", "tid", "start", "end"], ascending=[True, True, True, False], kind="stable")
    same = (table["pid"].to_numpy()[1:] == table["pid"].to_numpy()[:-1]) & (
        table["tid"].to_numpy()[1:] == table["tid"].to_numpy()[:-1]
    )
    reach = table.groupby(["pid", "tid"], sort=False)["end"].cummax().to_numpy()
    inside = np.zeros(len(table), dtype=bool)
    inside[1:] = same & (table["end"].to_numpy()[1:] <= reach[:-1])
    return table.loc[~inside].reset_index(drop=True)
