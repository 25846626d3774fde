"""What each CPU operator of a trace asked of the GPU (FLOPs and bytes, from its recorded inputs) and which
kernels ran for it.

Inputs come from torch.profiler's ``record_shapes`` (the ``op_shapes`` table: shapes, dtypes, scalars) or from
emit_nvtx's ``record_shapes`` range names in nsys exports ("aten::mm, seq = 3, sizes = [[8, 4], [4, 2]]":
shapes only; bytes then take the element size of the precision the operator's matrix kernel ran in, else stay
unknown). Counting is once per distinct signature (``hardware.op_counts``), never per operator.

A kernel belongs to the innermost operator of its launching thread that covers the launch call and has a
count; an operator's time is its kernels' GPU time (the launch join that exists). An operator with a count
whose nested operators also launched counted kernels (aten::linear around aten::addmm) keeps its kernels but
not its FLOPs, which the nested ones hold: nothing is counted twice.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracekit.analysis.hardware.op_counts import count_op, count_ops, shapes_from_nvtx_name
from tracekit.analysis.primitives.covering import covering_range
from tracekit.analysis.primitives.joins import op_launches
from tracekit.model.derived import per_trace
from tracekit.model.range_specs import shown_op_name
from tracekit.model.trace import Trace

NO_SHAPES = "no shapes recorded (torch.profiler record_shapes=True, or emit_nvtx(record_shapes=True))"
NESTED = "counted in the operators it calls"
# bytes per element of the precision a matrix kernel ran in: what an nsys operator's inputs were, where the
# export records shapes without dtypes (TF32 reads FP32 data)
ELEMENT_BYTES = {"FP64": 8, "FP32": 4, "TF32": 4, "BF16": 2, "FP16": 2, "FP8": 1, "INT8": 1, "FP4": 1}


@per_trace
def operator_inputs(trace: Trace) -> pd.DataFrame:
    """Per operator range with recorded inputs (index: its row in ``trace.ranges``): name, dims, types and
    concrete (JSON text; types None for nsys), and the profiler's own FLOPs (NaN when not counted)."""
    ranges = trace.ranges
    shapes = trace.optional("op_shapes")
    if shapes is not None and len(shapes):
        rows = pd.Index(ranges["range_id"].to_numpy()).get_indexer(shapes["range_id"].to_numpy())
        keep = rows >= 0
        names = ranges["name"].to_numpy()[rows[keep]]
        return pd.DataFrame(
            {
                "name": [shown_op_name(str(name)) for name in names],
                "dims": shapes["dims"].astype(str).to_numpy()[keep],
                "types": _recorded(shapes["types"])[keep],
                "concrete": _recorded(shapes["concrete"])[keep],
                "profiler_flops": shapes["flops"].to_numpy()[keep],
            },
            index=pd.Index(rows[keep], name="row"),
        )
    return _from_nvtx_names(ranges)


def _recorded(column: pd.Series) -> np.ndarray:
    """JSON texts as recorded; None where the profiler wrote none (torch before 2.0 has no Concrete Inputs)."""
    texts = column.astype(str).to_numpy(object)
    texts[texts == ""] = None
    return texts


def _from_nvtx_names(ranges: pd.DataFrame) -> pd.DataFrame:
    """emit_nvtx's "op, seq = N, sizes = [...]" names, parsed once per distinct name."""
    names = ranges["name"]
    parsed = [shapes_from_nvtx_name(str(name)) if ", sizes = " in str(name) else None for name in names.cat.categories]
    has = np.asarray([found is not None for found in parsed] + [False], dtype=bool)
    codes = names.cat.codes.to_numpy()
    rows = np.flatnonzero(has[codes])
    picked = [parsed[code] for code in codes[rows]]
    return pd.DataFrame(
        {
            "name": [found[0] for found in picked if found is not None],
            "dims": [repr(found[1]) for found in picked if found is not None],
            "types": None,
            "concrete": None,
            "profiler_flops": np.nan,
        },
        index=pd.Index(rows, name="row"),
    )


@per_trace
def operator_counts(trace: Trace) -> pd.DataFrame:
    """``operator_inputs`` with flops, bytes (NaN unknown), why_unknown and family per operator; torch.profiler's
    own FLOPs stand in where tracekit has no formula for the operator."""
    inputs = operator_inputs(trace)
    if inputs.empty:
        return inputs.assign(flops=np.nan, bytes=np.nan, why_unknown=None, family=None)
    counted = count_ops(pd.DataFrame(inputs[["name", "dims", "types", "concrete"]]).reset_index(drop=True))
    counted.index = inputs.index
    result = pd.concat([inputs, counted[["flops", "bytes", "why_unknown", "family"]]], axis=1)
    theirs = result["flops"].isna().to_numpy() & np.isfinite(result["profiler_flops"].to_numpy())
    if theirs.any():
        result.loc[theirs, "flops"] = result.loc[theirs, "profiler_flops"]
        result.loc[theirs, "why_unknown"] = "FLOPs as torch.profiler counted them (with_flops)"
    return result


def with_element_bytes(counts: pd.DataFrame, precision: pd.Series) -> pd.DataFrame:
    """Bytes of the operators whose dtypes were not recorded (nsys), from the element size of the precision
    their matrix kernel ran in (``precision``, per operator row): counted once per distinct signature."""
    element = precision.map(ELEMENT_BYTES)
    todo = counts["bytes"].isna().to_numpy() & counts["types"].isna().to_numpy() & element.notna().to_numpy()
    if not todo.any():
        return counts
    counts = counts.copy()
    keys = pd.DataFrame({"name": counts["name"][todo], "dims": counts["dims"][todo], "size": element[todo]})
    distinct = keys.drop_duplicates()
    found = {
        (name, dims, size): count_op(name, _dims(dims), None, None, int(size)).bytes
        for name, dims, size in distinct.itertuples(index=False)
    }
    counts.loc[todo, "bytes"] = [found[key] for key in keys.itertuples(index=False)]
    counts.loc[todo, "why_unknown"] = "dtype not recorded: bytes at the element size of the kernel's precision"
    return counts


def _dims(text: str) -> list:
    import json

    try:
        return json.loads(text.replace("(", "[").replace(")", "]"))
    except ValueError:
        return []


@per_trace
def kernel_operators(trace: Trace) -> pd.DataFrame:
    """Per GPU op (``gpu_ops`` row order): ``counted``, the row in ``ranges`` of the innermost covering
    operator with recorded inputs (-1: none), and ``operator``, the innermost covering operator of any kind
    (-1: none; what a row without a count is called)."""
    ops = trace.gpu_ops
    launches = op_launches(trace)
    counted = np.full(len(ops), -1, dtype=np.int64)
    anyone = np.full(len(ops), -1, dtype=np.int64)
    ranges = trace.ranges
    rows = np.flatnonzero(launches.found)
    if len(rows) and not ranges.empty:
        calls = trace.launches
        call_rows = launches.row[rows]
        pick = lambda column: calls[column].to_numpy()[call_rows]
        where = (pick("pid"), pick("tid"), pick("start"), pick("end"))
        inputs = operator_inputs(trace)
        has_inputs = np.zeros(len(ranges), dtype=bool)
        has_inputs[inputs.index.to_numpy()] = True
        is_operator = _operators(ranges)
        counted[rows] = covering_range(ranges, *where, has_inputs)
        anyone[rows] = covering_range(ranges, *where, is_operator)
    return pd.DataFrame({"counted": counted, "operator": anyone})


def _operators(ranges: pd.DataFrame) -> np.ndarray:
    """Ranges that are operators (torch.profiler's cpu_op domain, emit_nvtx's "aten::..." names)."""
    names = ranges["name"].cat.categories
    per_name = np.asarray(
        [str(name).startswith("cpu_op:") or shown_op_name(str(name)).startswith("aten::") for name in names] + [False]
    )
    return per_name[ranges["name"].cat.codes.to_numpy()] & (ranges["domain"].astype(str) != "gpu").to_numpy()


def outer_operators(ranges: pd.DataFrame, owners: np.ndarray) -> np.ndarray:
    """Of ``owners`` (rows of ranges that own counted kernels), a mask of those that enclose another owner:
    their FLOPs are the nested ones'. One vector step per nesting level."""
    parent = ranges["parent"].to_numpy()
    position = pd.Index(ranges["range_id"].to_numpy())
    is_owner = np.zeros(len(ranges), dtype=bool)
    is_owner[owners] = True
    enclosing = np.zeros(len(ranges), dtype=bool)
    current = owners.copy()
    for _ in range(10_000):  # deeper than any real nesting; a damaged parent chain cannot loop forever
        if not len(current):
            break
        up = position.get_indexer(parent[current])
        current = up[up >= 0]
        enclosing[current[is_owner[current]]] = True
    return enclosing[owners]
