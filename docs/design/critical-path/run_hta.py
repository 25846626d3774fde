"""Run HTA 0.5 critical path analysis on one trace file.
usage: run_hta.py TRACE NAME ANNOTATION INSTANCE [--patch]
 --patch: apply pandas-3 compatibility monkeypatches (see patches.py)
Writes /tmp/cpa/<NAME>_breakdown.csv, /tmp/cpa/<NAME>_path.csv, /tmp/cpa/runs/<NAME>.json
"""
import sys, os, json, time, traceback, tempfile, warnings, logging
trace, name, annotation, inst = sys.argv[1:5]
patch = "--patch" in sys.argv
OUT = os.environ.get("OUTDIR", "/tmp/cpa")
CFG = os.environ.get("CFG", "x")
inst = None if inst == "None" else (tuple(int(x) for x in inst.split(",")) if "," in inst else int(inst))
out = {"trace": trace, "name": name, "annotation": annotation, "instance_id": inst, "patched": patch}
warnings.simplefilter("ignore")
import pandas as pd, numpy as np
out["pandas"] = pd.__version__
out["cfg"] = CFG
if patch:
    sys.path.insert(0, "/tmp/cpa"); import patches; patches.apply(); out["patches"] = list(patches.APPLIED)
from hta.trace_analysis import TraceAnalysis
from hta.analyzers.critical_path_analysis import CPEdgeType
import hta.analyzers.critical_path_analysis as cpa_mod
logging.getLogger("hta").setLevel(logging.ERROR)
d = tempfile.mkdtemp(prefix="hta_", dir="/tmp/cpa/runs")
os.symlink(trace, os.path.join(d, os.path.basename(trace)))
stage = "load"
try:
    t0 = time.time()
    ta = TraceAnalysis(trace_dir=d)
    out["load_s"] = round(time.time() - t0, 2)
    rank = list(ta.t.traces.keys())[0]
    out["rank"] = rank
    stage = "critical_path_analysis"
    t0 = time.time()
    res = ta.critical_path_analysis(rank=rank, annotation=annotation, instance_id=inst)
    out["cpa_s"] = round(time.time() - t0, 2)
    if res is None:
        raise RuntimeError("critical_path_analysis returned None (annotation not found)")
    g, ok = res
    out["success"] = bool(ok)
    out["clipped_events"] = int(len(g.trace_df))
    out["node_list_len"] = len(g.node_list)
    out["nx_nodes"] = g.number_of_nodes()
    out["nx_edges"] = g.number_of_edges()
    from collections import Counter
    out["edge_types"] = dict(Counter(g.edges[u, v]["object"].type.name for u, v in g.edges))
    path = g.critical_path_nodes
    out["path_nodes"] = len(path)
    rows = []
    total_graph = 0
    for u, v in zip(path[:-1], path[1:]):
        e = g.edges[u, v]["object"]; gw = g.edges[u, v]["weight"]
        total_graph += gw
        nu, nv = g.node_list[u], g.node_list[v]
        rows.append(dict(src_node=u, dst_node=v, src_ev=int(nu.ev_idx), dst_ev=int(nv.ev_idx),
                         src_ts=nu.ts, dst_ts=nv.ts, src_is_start=nu.is_start, dst_is_start=nv.is_start,
                         type=e.type.value, weight=e.weight, graph_weight=gw,
                         attributed_event=g.get_event_attribution_for_edge(e)))
    pdf = pd.DataFrame(rows)
    pdf.to_csv(f"{OUT}/{name}_path.csv", index=False)
    out["path_length_graph_weights"] = float(total_graph)
    out["path_start_ts"] = float(g.node_list[path[0]].ts); out["path_end_ts"] = float(g.node_list[path[-1]].ts)
    if os.environ.get("DUMP_GRAPH"):
        gd = f"/tmp/cpa/runs/graphs/{name}__{CFG}"; os.makedirs(gd, exist_ok=True)
        pd.DataFrame([(n.idx, int(n.ev_idx), n.ts, n.is_start, n.is_blocking) for n in g.node_list],
                     columns=["idx", "ev_idx", "ts", "is_start", "is_blocking"]).to_csv(f"{gd}/nodes.csv", index=False)
        er = []
        for u, v in g.edges:
            e = g.edges[u, v]["object"]
            er.append((u, v, e.weight, g.edges[u, v]["weight"], e.type.name, g.edge_to_event_map.get((u, v))))
        pd.DataFrame(er, columns=["u", "v", "weight", "graph_weight", "type", "attr"]).to_csv(f"{gd}/edges.csv", index=False)
        pd.DataFrame({"node": list(g.nodes)}).to_csv(f"{gd}/nx_node_order.csv", index=False)
        pd.DataFrame({"node": path}).to_csv(f"{gd}/path_nodes.csv", index=False)
    stage = "get_critical_path_breakdown"
    bd = g.get_critical_path_breakdown()
    bd["cat_name"] = [g.symbol_table.sym_table[int(c)] if c == c and c >= 0 else "" for c in bd["cat"]]  # added by run_hta.py (cat is a per-process symbol id)
    bd.to_csv(f"{OUT}/{name}_breakdown.csv", index=False)
    out["breakdown_columns"] = list(bd.columns)
    out["breakdown_rows"] = len(bd)
    out["breakdown_duration_sum"] = float(bd.duration.sum())
    out["by_bound"] = {str(k): float(v) for k, v in bd.groupby("bound_by").duration.sum().items()}
    out["by_type"] = {str(k): float(v) for k, v in bd.groupby("type").duration.sum().items()}
    out["status"] = "ok"
except BaseException as ex:
    out["status"] = "error"; out["stage"] = stage
    out["error"] = f"{type(ex).__name__}: {ex}"[:600]
    out["traceback"] = traceback.format_exc()[-3000:]
json.dump(out, open(f"/tmp/cpa/runs/{name}__{CFG}.json", "w"), indent=1, default=str)
print(json.dumps({k: v for k, v in out.items() if k != "traceback"}, default=str)[:1500])
if out["status"] == "error": print(out["traceback"][-1500:])
