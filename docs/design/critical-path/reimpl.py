"""Independent re-implementation of HTA 0.5 critical path analysis, written from
/tmp/cpa/spec.md (numpy/pandas only, no networkx, no hta import).

usage: reimpl.py TRACE ANNOTATION INSTANCE [--stable]
Prints a JSON summary; with CMP=<hta graph dir> compares against a dump made by run_hta.py.
"""
from __future__ import annotations

import gzip
import json
import math
import os
import re
import sys
from collections import defaultdict

import numpy as np
import pandas as pd

LAUNCH_NAMES = {
    "cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cudaMemcpyAsync",
    "cudaMemsetAsync", "runFunction - job_prep_and_submit_for_execution",
    "hipLaunchKernel", "hipExtModuleLaunchKernel", "hipMemcpyAsync", "hipMemsetAsync",
    "hipMemcpyWithStream",
}
BLOCKING = {"cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventQuery",
            "cudaEventSynchronize", "cudaMemcpy", "cudaMemcpyAsync"}
NODE_CATS = {"cpu_op", "cuda_runtime", "cuda_driver"}
OP, DEP, LAUNCH, KK, SYNC = ("OPERATOR_KERNEL", "DEPENDENCY", "KERNEL_LAUNCH_DELAY",
                             "KERNEL_KERNEL_DELAY", "SYNC_DEPENDENCY")
TYPE_STR = {OP: "critical_path_operator", DEP: "critical_path_dependency",
            LAUNCH: "critical_path_kernel_launch_delay", KK: "critical_path_kernel_kernel_delay",
            SYNC: "critical_path_sync_dependency"}
SORT_KIND = "quicksort"


STABLE_SITES = set(os.environ.get("STABLE_SITES", "").split(","))


def argsort(a, site=""):
    kind = "stable" if site in STABLE_SITES else SORT_KIND
    return np.argsort(np.asarray(a), kind=kind)


# ----------------------------------------------------------------------------- parsing
def _stream(v):
    try:
        return int(v)
    except ValueError:
        return -1


def load_trace(path):
    op = gzip.open if path.endswith(".gz") else open
    with op(path, "rt") as fh:
        raw = json.load(fh)
    rows = []
    for i, e in enumerate(raw.get("traceEvents", [])):
        cat, dur, ts = e.get("cat"), e.get("dur"), e.get("ts")
        if cat is None or dur is None or cat == "Trace" or ts is None:
            continue
        a = e.get("args") if isinstance(e.get("args"), dict) else {}
        ts_r = math.ceil(float(ts))
        end_r = math.floor(float(ts) + float(dur))
        rows.append((i, cat, e.get("name"), e.get("pid"), e.get("tid"), ts_r, end_r - ts_r,
                     _stream(a.get("stream", -1)), a.get("correlation", -1),
                     a.get("wait_on_stream", -1), a.get("wait_on_cuda_event_record_corr_id", -1)))
    df = pd.DataFrame(rows, columns=["index", "cat", "name", "pid", "tid", "ts", "dur", "stream",
                                     "correlation", "wait_on_stream", "wait_on_rec"])
    symbols = set(df["cat"]) | set(df["name"])
    # correlation -> index_correlation
    df["index_correlation"] = np.minimum(df["correlation"].to_numpy(), 0)
    gpu_mask = ((df.stream >= 0) & (df.correlation >= 0)) | df.name.isin(["Event Sync", "Context Sync"])
    c = df[df.correlation != -1]
    on_cpu = c[~gpu_mask[c.index]][["index", "correlation"]]
    on_gpu = c[gpu_mask[c.index]][["index", "correlation"]]
    m = on_cpu.merge(on_gpu, on="correlation", how="inner")
    ic = df["index_correlation"].to_numpy().copy()
    pos = pd.Series(np.arange(len(df)), index=df["index"])
    ic[pos[m.index_x].to_numpy()] = m.index_y.to_numpy()
    ic[pos[m.index_y].to_numpy()] = m.index_x.to_numpy()
    df["index_correlation"] = ic
    df["end_unaligned"] = df.ts + df.dur
    # align
    df["ts"] = df.ts - df.ts.min()
    # ProfilerStep filter (only when >= 2 distinct symbols contain "ProfilerStep")
    if sum("ProfilerStep" in s for s in symbols) >= 2:
        gm = ((df.stream >= 0) & (df.correlation >= 0)) | df.name.isin(["Event Sync", "Context Sync"])
        cpu = df[~gm]
        last_start = cpu[cpu.name.str.contains("ProfilerStep", regex=False)].ts.max()
        cpu = cpu[cpu.ts < last_start]
        gpu = df[gm].merge(cpu[["correlation"]], on="correlation", how="inner")
        df = pd.concat([gpu, cpu], axis=0)
    df = df.set_index("index", drop=False)
    df.index.name = None
    return df, symbols


# ----------------------------------------------------------------------------- helpers
def shorten_name(name):
    if re.match(r"(^Memcpy)|(^Memset)|(^dma)", name):
        return name
    if name.find("<") < 0 and name.find("(") < 0:
        return name
    s = name.replace("->", "")
    st = []
    for ch in s:
        if ch == ">":
            while st and st[-1] != "<":
                st.pop()
            if st and st[-1] == "<":
                st.pop()
        elif ch == ")":
            while st and st[-1] != "(":
                st.pop()
            if st and st[-1] == "(":
                st.pop()
        else:
            st.append(ch)
    return "".join(st).split(" ")[-1]


class Graph:
    """Insertion-ordered digraph mimicking networkx.DiGraph semantics that matter here."""

    def __init__(self):
        self.nodes = {}          # node -> None, insertion ordered
        self.succ = defaultdict(dict)
        self.pred = defaultdict(dict)
        self.edges = {}          # (u,v) -> [weight, type, graph_weight]

    def add_edge(self, u, v, w, t):
        self.nodes.setdefault(u, None)
        self.nodes.setdefault(v, None)
        self.succ[u][v] = None
        self.pred[v][u] = None
        self.edges[(u, v)] = [w, t, w]


# ----------------------------------------------------------------------------- CPA
def critical_path_analysis(full, symbols, annotation, instance_id):
    # window
    ann_syms = {s for s in symbols if annotation in s}
    if not ann_syms:
        return None
    if instance_id is None:
        i0 = i1 = 0
    elif isinstance(instance_id, tuple):
        i0, i1 = instance_id
    else:
        i0 = i1 = instance_id
    if annotation == "":
        start_ts, end_ts = full.ts.min(), full.end_unaligned.max()
    else:
        ann = full[full.name.isin(ann_syms)]
        sel = ann.iloc[i0:i1 + 1]
        start_ts, end_ts = sel.ts.min(), (sel.ts + sel.dur).max()
    cpu = full[full.stream == -1]
    a = cpu[(cpu.ts >= start_ts) & (cpu.ts <= end_ts) & (cpu.dur > 0)].index
    ok_rt = cpu[(cpu.ts >= start_ts) & (cpu.ts <= end_ts) & (cpu.dur > 0)].index_correlation
    gpu = full[full.stream != -1]
    b = gpu[gpu.index.isin(set(ok_rt.to_numpy())) | (gpu.name == "Stream Wait Event")].index
    keep = np.union1d(np.asarray(a), np.asarray(b))
    df = full.loc[keep]

    # nodes
    is_node = df.cat.isin(NODE_CATS) | ((df.stream != -1) & (df.index_correlation >= 0))
    ev = df[is_node]
    ev_ids = ev["index"].to_numpy()
    n_ev = len(ev)
    all_ev = np.concatenate([ev_ids, ev_ids])
    all_ts = np.concatenate([ev.ts.to_numpy().astype(np.float64),
                             (ev.ts + ev.dur).to_numpy().astype(np.float64)])
    all_start = np.concatenate([np.ones(n_ev, bool), np.zeros(n_ev, bool)])
    blocking = ev.name.isin(BLOCKING).to_numpy()
    all_block = np.concatenate([blocking, blocking])
    order = argsort(all_ts, 'nodes')
    N_ev, N_ts, N_start, N_block = all_ev[order], all_ts[order], all_start[order], all_block[order]
    start_node = {int(e): i for i, e in enumerate(N_ev) if N_start[i]}
    end_node = {int(e): i for i, e in enumerate(N_ev) if not N_start[i]}

    G = Graph()
    attr = {}

    def add(u, v, t, zero=False):
        w = 0 if (t in (DEP, SYNC) or zero) else (N_ts[v] - N_ts[u])
        G.add_edge(u, v, w, t)

    def attribute(u, v, t, src_parent):
        if t not in (OP, KK):
            return
        if t == KK or N_start[u]:
            attr[(u, v)] = int(N_ev[u])
        elif not N_start[v]:
            attr[(u, v)] = int(N_ev[v])
        else:
            attr[(u, v)] = int(src_parent)

    # ---- CPU call stacks: one per (pid, tid), groups in sorted key order
    for (pid, tid), th in df.groupby(["pid", "tid"], sort=True):
        if (th.stream > 0).any():
            th = th[th.stream > 0]
        st = th.stream.unique()
        if not (len(st) > 0 and np.all(st < 0)):
            continue   # GPU or UNKNOWN stacks are not used
        idx = th["index"].to_numpy()
        ts = th.ts.to_numpy()
        dur = np.maximum(th.dur.to_numpy(), 0)
        # (time, END before START, START: longer first then lower idx, END: shorter first then higher idx)
        evts = []
        for i, t0, d in zip(idx, ts, dur):
            evts.append((t0, 1, -d, i, i, 1))
            evts.append((t0 + d, 0, d, -i, i, -1))
        evts.sort(key=lambda x: x[:4])
        parent, children = {}, defaultdict(list)
        stack = []
        for _, _, _, _, i, typ in evts:
            if typ == 1:
                p = stack[-1] if stack else -1
                parent[i] = p
                children[p].append(i)
                stack.append(i)
            elif stack:
                stack.pop()
        # DFS
        last_node = None
        last_hl = None
        depth = 0
        last_parent = None

        def enter(e):
            nonlocal last_node, last_hl, depth, last_parent
            if e not in start_node:
                return
            s = start_node[e]
            if depth == 0 and last_hl is not None:
                add(last_hl, s, DEP)
            depth += 1
            if last_node is not None:
                add(last_node, s, OP)
                attribute(last_node, s, OP, last_parent)
            last_node = s
            last_parent = parent[e]

        def leave(e):
            nonlocal last_node, last_hl, depth, last_parent
            if e not in start_node:
                return
            s, en = start_node[e], end_node[e]
            depth -= 1
            if last_node is not None:
                add(last_node, en, OP, zero=bool(N_block[s]))
                attribute(last_node, en, OP, last_parent)
            if depth == 0:
                last_node = None
                last_hl = en
            else:
                last_node = en
                last_parent = parent[e]

        work = [(-1, False)]
        while work:
            e, done = work.pop()
            if done:
                leave(e)
                continue
            enter(e)
            work.append((e, True))
            for c in reversed(children.get(e, [])):
                work.append((c, False))

    # ---- queue length (on the full trace)
    is_launch = full.name.isin(LAUNCH_NAMES) & (full.index_correlation > 0)
    R = full[is_launch][["index", "ts", "correlation"]]
    Gk = full[full.stream != -1]
    Rj = R.merge(Gk[["correlation", "stream"]], on="correlation", how="left")
    K = Gk[Gk.correlation.isin(R.correlation)][["index", "ts", "stream"]]
    assert len(Rj) == len(K)
    mg_idx = np.concatenate([Rj["index"].to_numpy(), K["index"].to_numpy()])
    mg_ts = np.concatenate([Rj.ts.to_numpy(), K.ts.to_numpy()])
    mg_q = np.concatenate([np.ones(len(Rj), int), -np.ones(len(K), int)])
    mg_st = np.concatenate([Rj.stream.to_numpy(), K.stream.to_numpy()])
    o = argsort(mg_ts, 'queue')
    qlen = {}
    run = defaultdict(int)
    for j in o:
        if mg_st[j] != mg_st[j]:
            continue
        run[mg_st[j]] += mg_q[j]
        qlen[int(mg_idx[j])] = run[mg_st[j]]

    # ---- launches with a launch id (sorted by runtime ts)
    L = full[is_launch].copy()
    L = L.iloc[argsort(L.ts.to_numpy(), 'launch')]
    gk2 = full[(full.stream != -1) & (full.index_correlation > 0)]
    gk2_stream = dict(zip(gk2["index"], gk2.stream))
    gk2_pid = dict(zip(gk2["index"], gk2.pid))
    L = L[L.index_correlation.isin(gk2_stream.keys())].copy()
    L["k_stream"] = L.index_correlation.map(gk2_stream)
    L["k_gpu"] = L.index_correlation.map(gk2_pid)
    L["launch_id"] = np.arange(len(L))

    # ---- cudaEventRecord -> index of previous launch on the recorded (gpu, stream)
    prev_launch = {}   # record correlation -> launch event index or -1
    if "cudaEventRecord" in symbols:
        rec = full[full.name == "cudaEventRecord"]
        rec = rec.iloc[argsort(rec.ts.to_numpy())]
        ws = full[full.wait_on_stream > -1][["wait_on_rec", "wait_on_stream", "pid"]].drop_duplicates()
        assert not ws.wait_on_rec.duplicated().any(), "one_to_one validation would fail"
        wmap = {r.wait_on_rec: (r.wait_on_stream, r.pid) for r in ws.itertuples()}
        rec = rec[rec.correlation.isin(wmap.keys())].copy()
        rec["r_stream"] = rec.correlation.map(lambda c: wmap[c][0])
        rec["r_gpu"] = rec.correlation.map(lambda c: wmap[c][1])
        for (g, s), rg in rec.groupby(["r_gpu", "r_stream"], sort=True):
            comb_ts = np.concatenate([L.ts.to_numpy(), rec.ts.to_numpy()])
            comb_kind = np.concatenate([np.zeros(len(L), int), np.ones(len(rec), int)])
            comb_row = np.concatenate([np.arange(len(L)), np.arange(len(rec))])
            o = argsort(comb_ts)
            lk = set(np.flatnonzero(((L.k_gpu == g) & (L.k_stream == s)).to_numpy()))
            rk = set(np.flatnonzero(((rec.r_gpu == g) & (rec.r_stream == s)).to_numpy()))
            best = -1
            for j in o:
                if comb_kind[j] == 0:
                    if comb_row[j] in lk:
                        best = max(best, int(L.launch_id.iat[comb_row[j]]))
                elif comb_row[j] in rk:
                    r = rec.iloc[comb_row[j]]
                    prev_launch[r.correlation] = int(L["index"].iat[best]) if best >= 0 else -1

    # ---- cudaStreamWaitEvent -> index of next launch on same thread + waiting stream
    next_launch = {}   # cudaStreamWaitEvent runtime index -> launch index or -1
    have_swe = "cudaStreamWaitEvent" in symbols and "Stream Wait Event" in symbols
    if have_swe:
        W = full[(full.name == "cudaStreamWaitEvent") & (full.index_correlation > 0)]
        W = W.iloc[argsort(W.ts.to_numpy())]
        W = W[W.index_correlation.isin(gk2_stream.keys())].copy()
        W["w_stream"] = W.index_correlation.map(gk2_stream)
        comb_ts = np.concatenate([L.ts.to_numpy(), W.ts.to_numpy()])
        comb_kind = np.concatenate([np.zeros(len(L), int), np.ones(len(W), int)])
        comb_row = np.concatenate([np.arange(len(L)), np.arange(len(W))])
        o = argsort(comb_ts)
        for key in W[["pid", "tid", "w_stream"]].drop_duplicates().itertuples(index=False):
            pid, tid, s = key
            lk = set(np.flatnonzero(((L.pid == pid) & (L.tid == tid) & (L.k_stream == s)).to_numpy()))
            wk = set(np.flatnonzero(((W.pid == pid) & (W.tid == tid) & (W.w_stream == s)).to_numpy()))
            best = None
            for j in o[::-1]:
                if comb_kind[j] == 0:
                    if comb_row[j] in lk:
                        lid = int(L.launch_id.iat[comb_row[j]])
                        best = lid if best is None else min(best, lid)
                elif comb_row[j] in wk:
                    next_launch[int(W["index"].iat[comb_row[j]])] = (
                        int(L["index"].iat[best]) if best is not None else -1)

    # ---- GPU loop
    sync_names = {"Event Sync", "Context Sync"}
    gk = df[((df.stream != -1) | df.name.isin(sync_names)) & (df.index_correlation >= 0)].copy()
    is_sync = (gk.cat == "cuda_sync").to_numpy()
    sort_by = np.where(is_sync, gk.ts + gk.dur, gk.ts)
    if np.all(sort_by == np.floor(sort_by)):
        sort_by = sort_by.astype(np.int64)
    gk = gk.iloc[argsort(sort_by, 'gpuloop')]
    last = {}
    ksync = {}
    full_ic = full.index_correlation
    full_ts = full.ts

    for r in gk.itertuples(index=False):
        if r.cat == "cuda_sync":
            if r.name in ("Stream Wait Event", "Event Sync"):
                pl = prev_launch.get(r.wait_on_rec, -1) if "cudaEventRecord" in symbols else -1
                if pl == -1:
                    continue
                src_k = int(full_ic[pl])
                if r.name == "Stream Wait Event":
                    dl = next_launch[int(r.index_correlation)]
                    if dl < 0:
                        continue
                    ksync[int(full_ic[dl])] = src_k
                else:
                    if src_k in end_node:
                        add(end_node[src_k], end_node[int(r.index_correlation)], SYNC)
                continue
            assert r.name in ("Stream Sync", "Context Sync"), r.name
            nodes = list(last.values()) if r.name == "Context Sync" else [last.get(r.stream)]
            for gn in nodes:
                if gn is not None:
                    add(gn, end_node[int(r.index_correlation)], SYNC)
            continue
        eid, stream = int(r.index), r.stream
        s, en = start_node[eid], end_node[eid]
        add(s, en, OP)
        attribute(s, en, OP, -1)
        ks = ksync.get(eid)
        ks_end = None
        added = False
        if ks is not None:
            if ks in end_node:
                ks_end = end_node[ks]
                add(ks_end, s, SYNC)
                added = True
            else:
                ks = None
            ksync[eid] = None
        rt = int(r.index_correlation)
        rt_ts = full_ts[rt]
        q_rt, q_k = qlen.get(rt, np.nan), qlen.get(eid, np.nan)
        if (q_rt == 1 and q_k == 0
                and (last.get(stream) is None or N_ts[last[stream]] < rt_ts)
                and (ks is None or N_ts[ks_end] < rt_ts)):
            assert rt in start_node, f"Could not find runtime index = {rt}"
            add(start_node[rt], s, LAUNCH)
            added = True
        elif last.get(stream) is not None and (ks is None or N_ts[ks_end] < N_ts[last[stream]]):
            add(last[stream], s, KK)
            attribute(last[stream], s, KK, -1)
            added = True
        last[stream] = en

    # ---- validation
    for (u, v), e in G.edges.items():
        if e[0] <= -1:
            e[2] = 0
        if e[1] == SYNC:
            su = df.stream[N_ev[u]]
            sv = df.stream[N_ev[v]]
            if su != -1 and su == sv:
                raise ValueError("sync between kernels on same stream")

    # ---- longest path (networkx dag_longest_path semantics)
    indeg = {n: len(G.pred[n]) for n in G.nodes}
    gen = [n for n in G.nodes if indeg[n] == 0]
    topo = []
    while gen:
        topo.extend(gen)
        nxt = []
        for n in gen:
            for c in G.succ[n]:
                indeg[c] -= 1
                if indeg[c] == 0:
                    nxt.append(c)
        gen = nxt
    if len(topo) != len(G.nodes):
        raise ValueError("cycle")
    dist = {}
    for v in topo:
        best = None
        for u in G.pred[v]:
            cand = dist[u][0] + G.edges[(u, v)][2]
            if best is None or cand > best[0]:
                best = (cand, u)
        if best is None:
            best = (0, v)
        dist[v] = best if best[0] >= 0 else (0, v)
    v = None
    for n in topo:
        if v is None or dist[n][0] > dist[v][0]:
            v = n
    path = []
    u = None
    while u != v:
        path.append(v)
        u = v
        v = dist[v][1]
    path.reverse()

    # ---- breakdown (rows in path order)
    recs = []
    for u, v in zip(path[:-1], path[1:]):
        w, t, gw = G.edges[(u, v)]
        ev_i = attr.get((u, v))
        row = dict(event_idx=ev_i, duration=w, type=TYPE_STR[t])
        if ev_i is not None:
            e = df.loc[ev_i]
            row.update(s_name=shorten_name(e["name"]), cat_name=e["cat"], pid=e["pid"], tid=e["tid"],
                       stream=e["stream"], index=ev_i)
        if t == KK:
            bb = "gpu_kernel_kernel_overhead"
        elif t == LAUNCH:
            bb = "gpu_kernel_launch_overhead"
        elif t in (DEP, SYNC):
            bb = ""
        elif row["stream"] < 0:
            bb = "cpu_bound"
        elif re.match(r"^nccl.*Kernel", row["s_name"]):
            bb = "gpu_communication_bound"
        else:
            bb = "gpu_compute_bound"
        row["bound_by"] = bb
        recs.append(row)
    bd = pd.DataFrame(recs)
    return dict(df=df, N_ev=N_ev, N_ts=N_ts, N_start=N_start, G=G, attr=attr, path=path,
                length=dist[path[-1]][0], breakdown=bd)


def main():
    global SORT_KIND
    trace, annotation, inst = sys.argv[1:4]
    if "--stable" in sys.argv:
        SORT_KIND = "stable"
    inst = None if inst == "None" else (tuple(int(x) for x in inst.split(",")) if "," in inst else int(inst))
    full, symbols = load_trace(trace)
    res = critical_path_analysis(full, symbols, annotation, inst)
    G = res["G"]
    out = dict(clipped_events=len(res["df"]), node_list_len=len(res["N_ev"]), nx_nodes=len(G.nodes),
               nx_edges=len(G.edges), path_nodes=len(res["path"]), length=float(res["length"]),
               breakdown_sum=float(res["breakdown"].duration.sum()),
               by_bound={k: float(v) for k, v in res["breakdown"].groupby("bound_by").duration.sum().items()})
    cmp_dir = os.environ.get("CMP")
    if cmp_dir:
        hn = pd.read_csv(f"{cmp_dir}/nodes.csv")
        he = pd.read_csv(f"{cmp_dir}/edges.csv")
        ho = pd.read_csv(f"{cmp_dir}/nx_node_order.csv").node.tolist()
        hp = pd.read_csv(f"{cmp_dir}/path_nodes.csv").node.tolist()
        out["nodes_equal"] = bool(np.array_equal(hn.ev_idx.to_numpy(), res["N_ev"]) and
                                  np.allclose(hn.ts.to_numpy(), res["N_ts"]) and
                                  np.array_equal(hn.is_start.to_numpy(), res["N_start"]))
        # networkx iterates edges by source node (node insertion order), then successor insertion order
        me = [(u, v, float(G.edges[(u, v)][0]), float(G.edges[(u, v)][2]), G.edges[(u, v)][1],
               res["attr"].get((u, v))) for u in G.nodes for v in G.succ[u]]
        he_l = [(int(r.u), int(r.v), float(r.weight), float(r.graph_weight), r.type,
                 None if pd.isna(r.attr) else int(r.attr)) for r in he.itertuples()]
        out["edges_equal_in_order"] = me == he_l
        out["edges_equal_as_set"] = set(me) == set(he_l)
        if not out["edges_equal_as_set"]:
            out["edges_only_mine"] = sorted(set(me) - set(he_l))[:10]
            out["edges_only_hta"] = sorted(set(he_l) - set(me))[:10]
        out["nx_node_order_equal"] = list(G.nodes) == ho
        out["path_equal"] = res["path"] == hp
        # node-id-free comparison: nodes named by (event id, is_start)
        hk = list(zip(hn.ev_idx.tolist(), hn.is_start.tolist()))
        mk = [(int(a), bool(b)) for a, b in zip(res["N_ev"], res["N_start"])]
        out["edges_equal_by_event"] = ({(hk[a], hk[b]) + t[2:] for (a, b, *_), t in zip(he_l, he_l)} ==
                                       {(mk[a], mk[b]) + t[2:] for (a, b, *_), t in zip(me, me)})
        out["path_equal_by_event"] = [hk[n] for n in hp] == [mk[n] for n in res["path"]]
    print(json.dumps(out, default=str))


if __name__ == "__main__":
    main()
