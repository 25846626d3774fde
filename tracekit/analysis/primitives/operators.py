"""What each CPU operator of a trace asked of the GPU (FLOPs and bytes, from its recorded inputs) and which
kernels ran for it.

Inputs come from torch.profiler's ``record_shapes`` (the ``op_shapes`` table: shapes, dtypes, scalars) or from
emit_nvtx's ``record_shapes`` range names in nsys exports ("aten::mm, seq = 3, sizes = [[8, 4], [4, 2]]":
shapes only; bytes then take the element size of the precision the operator's matrix kernel ran in, else stay
unknown). Counting is once per distinct signature (``hardware.op_counts``), never per operator.

A kernel belongs to the innermost operator with recorded inputs of its launching thread that covers the
launch call; an operator's time is its kernels' GPU time (the launch join that exists). Only those operators
are read and nested among themselves (an nsys export's millions of other ranges stay in the file). An
operator with a count whose nested operators also launched kernels (aten::linear around aten::addmm) keeps
its kernels but not its FLOPs, which the nested ones hold: nothing is counted twice.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from tracekit.analysis.hardware.op_counts import count_op, count_ops, shapes_from_nvtx_name
from tracekit.analysis.primitives.covering import covering_range, parent_rows
from tracekit.analysis.primitives.joins import op_launches
from tracekit.model.derived import per_trace
from tracekit.model.range_specs import Pattern, shown_op_name
from tracekit.model.trace import Trace

NO_SHAPES = "no shapes recorded (torch.profiler record_shapes=True, or emit_nvtx(record_shapes=True))"
NESTED = "bytes counted in the operators it calls (its FLOPs: its own less theirs)"
# bytes per element of the precision a matrix kernel ran in: what an nsys operator's inputs were, where the
# export records shapes without dtypes (TF32 reads FP32 data)
ELEMENT_BYTES = {"FP64": 8, "FP32": 4, "TF32": 4, "BF16": 2, "FP16": 2, "FP8": 1, "INT8": 1, "FP4": 1}
# emit_nvtx's operator ranges with their shapes, and without (an nsys reader filters on them in SQL)
SIZED = Pattern("*, sizes = [[]*", None, (", sizes = [",))
ATEN = Pattern("aten::*", None, ("aten::",), "aten::")


@per_trace
def operator_inputs(trace: Trace) -> pd.DataFrame:
    """The operators with recorded inputs, nested among themselves: their ranges' columns (range_id, start,
    end, pid, tid, depth, parent; source_id: the range_id in ``trace.ranges``) with name (as the operator tables show it), dims, types and concrete (JSON
    text; types None for nsys), and the profiler's own FLOPs (NaN when not counted)."""
    shapes = trace.optional("op_shapes")
    if shapes is not None and len(shapes):
        ranges = trace.ranges
        rows = pd.Index(ranges["range_id"].to_numpy()).get_indexer(shapes["range_id"].to_numpy())
        keep = rows >= 0
        chosen = ranges.iloc[rows[keep]].reset_index(drop=True)
        return _renested(
            chosen.assign(
                name=shown_names(chosen["name"]),
                dims=shapes["dims"].astype(str).to_numpy(object)[keep],
                types=_recorded(shapes["types"])[keep],
                concrete=_recorded(shapes["concrete"])[keep],
                profiler_flops=shapes["flops"].to_numpy()[keep],
            )
        )
    return _from_nvtx_names(trace.ranges_named({SIZED}))


def _renested(frame: pd.DataFrame) -> pd.DataFrame:
    """The operators nested among themselves: range_id its row, parent the row of the innermost operator
    around it (an operator's parent may be an annotation that is not an operator)."""
    from tracekit.model.nesting import nest_ranges

    keys = frame["pid"].to_numpy(np.int64) * 2**32 + frame["tid"].to_numpy(np.int64)
    parent, depth = nest_ranges(keys, frame["start"].to_numpy(), frame["end"].to_numpy())
    return frame.assign(
        source_id=frame["source_id"] if "source_id" in frame else frame["range_id"],
        range_id=np.arange(len(frame), dtype=np.int64),
        parent=parent,
        depth=depth,
    )


def _recorded(column: pd.Series) -> np.ndarray:
    """JSON texts as recorded; None where the profiler wrote none (torch before 2.0 has no Concrete Inputs)."""
    texts = column.astype(str).to_numpy(object)
    texts[texts == ""] = None
    return texts


def _from_nvtx_names(ranges: pd.DataFrame) -> pd.DataFrame:
    """emit_nvtx's "op, seq = N, sizes = [...]" names, parsed once per distinct name."""
    names = ranges["name"].cat.remove_unused_categories()  # a selection keeps every name of the trace
    parsed = [shapes_from_nvtx_name(str(name)) for name in names.cat.categories]
    has = np.asarray([found is not None for found in parsed] + [False], dtype=bool)
    codes = names.cat.codes.to_numpy()
    chosen = ranges.loc[has[codes]].reset_index(drop=True)
    picked = [parsed[code] for code in codes[has[codes]]]
    # the reader nested the selection among itself; again only if some names did not parse
    nested = _renested if len(chosen) < len(ranges) else (lambda frame: frame.assign(source_id=frame["range_id"]))
    return nested(
        chosen.assign(
            name=pd.Categorical([found[0] for found in picked if found is not None]),
            dims=np.asarray([repr(found[1]) for found in picked if found is not None], dtype=object),
            types=None,
            concrete=None,
            profiler_flops=np.nan,
        )
    )


@per_trace
def operator_counts(trace: Trace) -> pd.DataFrame:
    """Per row of ``operator_inputs``: flops, bytes (NaN unknown), why_unknown and family; torch.profiler's
    own FLOPs stand in where tracekit has no formula for the operator."""
    inputs = operator_inputs(trace)
    if inputs.empty:
        return pd.DataFrame({"flops": [], "bytes": [], "why_unknown": [], "family": []})
    frame = pd.DataFrame(
        {
            "name": inputs["name"].astype(str).to_numpy(object),
            "dims": inputs["dims"].to_numpy(object),
            "types": inputs["types"].to_numpy(object),
            "concrete": inputs["concrete"].to_numpy(object),
        }
    )
    counted = count_ops(frame)
    result = pd.DataFrame(
        {
            "flops": counted["flops"].to_numpy(float),
            "bytes": counted["bytes"].to_numpy(float),
            "why_unknown": counted["why_unknown"].to_numpy(object),
            "family": counted["family"].to_numpy(object),
        }
    )
    theirs = np.isnan(result["flops"].to_numpy()) & np.isfinite(inputs["profiler_flops"].to_numpy(float))
    if theirs.any():
        result.loc[theirs, "flops"] = inputs["profiler_flops"].to_numpy(float)[theirs]
        result.loc[theirs, "why_unknown"] = "FLOPs as torch.profiler counted them (with_flops)"
    return result


def with_element_bytes(counts: pd.DataFrame, inputs: pd.DataFrame, precision: pd.Series) -> pd.DataFrame:
    """Bytes of the operators whose dtypes were not recorded (nsys), from the element size of the precision
    their matrix kernel ran in (``precision``, per row of ``counts``): counted once per distinct signature."""
    element = precision.map(ELEMENT_BYTES).to_numpy(float)
    todo = np.isnan(counts["bytes"].to_numpy(float)) & pd.isna(inputs["types"]).to_numpy() & ~np.isnan(element)
    if not todo.any():
        return counts
    counts = counts.copy()
    keys = pd.DataFrame(
        {"name": inputs["name"].astype(str).to_numpy(object)[todo], "dims": inputs["dims"].to_numpy()[todo]}
    ).assign(size=element[todo].astype(int))
    found = {
        (name, dims, size): count_op(name, _dims(dims), None, None, int(size)).bytes
        for name, dims, size in keys.drop_duplicates().itertuples(index=False)
    }
    counts.loc[todo, "bytes"] = [found[key] for key in keys.itertuples(index=False)]
    counts.loc[todo, "why_unknown"] = "dtype not recorded: bytes at the element size of the kernel's precision"
    return counts


def _dims(text: str) -> list:
    try:
        return json.loads(text.replace("(", "[").replace(")", "]"))
    except ValueError:
        return []


def covering_operators(trace: Trace, operators: pd.DataFrame) -> np.ndarray:
    """Per GPU op (``gpu_ops`` order): the row in ``operators`` of the innermost one covering its launch call
    on the call's thread (-1: none, or no launching call in the trace)."""
    launches = op_launches(trace)
    found = np.full(len(launches.found), -1, dtype=np.int64)
    rows = np.flatnonzero(launches.found)
    if len(rows) and len(operators):
        calls = trace.launches
        call_rows = launches.row[rows]
        pick = lambda column: calls[column].to_numpy()[call_rows]
        eligible = np.ones(len(operators), dtype=bool)
        found[rows] = covering_range(operators, pick("pid"), pick("tid"), pick("start"), pick("end"), eligible)
    return found


@per_trace
def named_operators(trace: Trace) -> pd.DataFrame:
    """Every operator range, nested among themselves, for naming a kernel's operator: those with recorded
    inputs where the trace has them (emit_nvtx names every operator with its sizes then), else torch.profiler's
    CPU operators, or emit_nvtx's "aten::..." ranges (read alone from an nsys export, nested by the reader)."""
    inputs = operator_inputs(trace)
    if len(inputs):
        return inputs
    if trace.meta.tool == "nsys":
        ranges = trace.ranges_named({ATEN})
        return ranges.assign(name=shown_names(ranges["name"]))
    ranges = trace.ranges
    ranges = ranges.loc[(ranges["domain"].astype(str) == "cpu_op").to_numpy()].reset_index(drop=True)
    return _renested(ranges.assign(name=shown_names(ranges["name"])))


def shown_names(names: pd.Series) -> pd.Categorical:
    """Range names as the operator tables show them ("cpu_op:aten::mm", "aten::mm, seq = 3" -> "aten::mm"),
    decided once per distinct name."""
    codes, shown = pd.factorize(np.asarray([shown_op_name(str(name)) for name in names.cat.categories], dtype=object))
    mapped = np.append(codes, -1)[names.cat.codes.to_numpy()]
    return pd.Categorical.from_codes(mapped, categories=pd.Index(shown, dtype=object))


def outer_operators(operators: pd.DataFrame, owners: np.ndarray) -> np.ndarray:
    """Of ``owners`` (rows of ``operators`` that own kernels), a mask of those that enclose another owner:
    their FLOPs are the nested ones'. One vector step per nesting level."""
    parent = parent_rows(operators)
    is_owner = np.zeros(len(operators), dtype=bool)
    is_owner[owners] = True
    enclosing = np.zeros(len(operators), dtype=bool)
    current = owners.copy()
    for _ in range(10_000):  # deeper than any real nesting; a damaged parent chain cannot loop forever
        if not len(current):
            break
        up = parent[current]
        current = up[up >= 0]
        enclosing[current[is_owner[current]]] = True
    return enclosing[owners]


def nested_flops(operators: pd.DataFrame, owners: np.ndarray, flops: np.ndarray) -> np.ndarray:
    """Per owner (rows of ``operators`` that own kernels, with their ``flops``): the FLOPs of the owners nested
    in it whose nearest enclosing owner it is (NaN among them makes the sum NaN). An operator that launched
    kernels of its own around others that did (aten::mse_loss around aten::mean) keeps its count less theirs."""
    parent = parent_rows(operators)
    position = np.full(len(operators), -1, dtype=np.int64)
    position[owners] = np.arange(len(owners))
    total = np.zeros(len(owners))
    current, carried = owners.copy(), flops.astype(float)
    for _ in range(10_000):  # as outer_operators
        up = parent[current]
        alive = up >= 0
        current, carried = up[alive], carried[alive]
        if not len(current):
            break
        landed = position[current] >= 0
        np.add.at(total, position[current[landed]], carried[landed])
        current, carried = current[~landed], carried[~landed]
    return total


def instance_flops(trace: Trace, range_rows: np.ndarray) -> np.ndarray:
    """FLOPs of the operator instances at ``range_rows`` (rows of ``trace.ranges`` that launched kernels), NaN
    where not counted; an instance around others of them keeps its count less theirs."""
    inputs = operator_inputs(trace)
    flops = np.full(len(range_rows), np.nan)
    if not len(inputs) or not len(range_rows):
        return flops
    wanted = trace.ranges["range_id"].to_numpy()[range_rows]
    at = pd.Index(inputs["source_id"].to_numpy()).get_indexer(wanted)
    found = at >= 0
    counted = operator_counts(trace)["flops"].to_numpy(float)
    flops[found] = counted[at[found]]
    outer = np.zeros(len(range_rows), dtype=bool)
    outer[found] = outer_operators(inputs, at[found])
    inner = np.zeros(len(range_rows))
    inner[found] = nested_flops(inputs, at[found], flops[found])
    own = flops - inner
    flops[outer] = np.where(own[outer] >= 0, own[outer], np.nan)
    return flops
