# %% [markdown]
# # Tutorial: a training step in a notebook
#
# This page is `docs/tutorial.py`, run cell by cell on real traces each time the docs are built
# (`make docs`), so every output below is what tracekit shows today. Its `# %%` cells open as a
# notebook (Jupyter with Jupytext, VS Code) from the project's folder, with `.venv` as the kernel: a
# `Result` shows itself there as the formatted tables below, while its DataFrames keep the raw values.
#
# The files are the real ones in `../shared` beside the project: an nsys export of one training
# step of a small language model on an A100, two H100 exports of a video model, and a CUDA memory
# snapshot of a GPT-2 medium training step.

# %%
import tempfile
from pathlib import Path

import tracekit

shared = Path("../shared")
step = shared / "traces" / "a100_small_lm_trainstep_nsys2026.3.sqlite"

# %% [markdown]
# ## Open a trace
#
# `open_trace` reads an nsys SQLite export, an `.nsys-rep` report, a torch.profiler trace or a run
# folder of `tracekit capture`. Its tables follow one [column contract](reference/columns.md):
# times are integer nanoseconds from the trace's start, whatever wrote the file.

# %%
trace = tracekit.open_trace(step)
trace.gpu_ops[["kind", "device", "stream", "start", "duration", "name"]].head(3)

# %% [markdown]
# ## Which kernels take the time
#
# Every analysis is one function with the command's name and its options as keywords. It returns a
# `Result`: named pandas DataFrames with raw values (no rounding), the units of their columns,
# and notes. The kernel summary is nsys's own: `nsys stats --report gpukernsum` in nsys 2022.4,
# `cuda_gpu_kern_sum` from 2023.1.

# %%
kernels = tracekit.kernels(trace, top=5, name="short")
kernels

# %% [markdown]
# Shown, a Result rounds for people; its tables hold the raw values, to compute with. Here the top
# five kernels' share of all kernel time, and their time in integer nanoseconds:

# %%
frame = kernels["kernels"]
print(f"top 5 kernels: {frame['Time (%)'].sum():.2f} % of kernel time, {frame['Total Time (ns)'].sum():,} ns")

# %% [markdown]
# ## Where each phase's time goes
#
# This step's NVTX ranges are named "forward pass", "backward pass" and "optimizer step" (not the
# default forward, backward, optimizer): name them with `phases`. Range specs take globs and
# nesting (`step/backward`); see [range specs](reference/range-specs.md).

# %%
phases = tracekit.breakdown(trace, phases=["forward pass", "backward pass", "optimizer step"])
phases

# %% [markdown]
# Which category takes most of each phase's kernel time:

# %%
shares = phases["breakdown"].set_index("Phase").filter(like="(%)")
for phase, category in shares.loc[["forward pass", "backward pass", "optimizer step"]].idxmax(axis=1).items():
    print(f"{phase}: {category.removesuffix(' (%)')} ({shares.at[phase, category]:.1f} %)")

# %% [markdown]
# ## Why the GPU sat idle
#
# Every gap between the GPU's busy intervals gets one cause; then the longest gaps, and the gaps'
# lengths by cause.

# %%
idle = tracekit.idle(trace, top=5)
idle

# %% [markdown]
# ## Two traces: what changed
#
# Two exports of the same video model. `diff` says where GPU time moved, per phase and category
# (`by="kernel"`: which kernels changed most).

# %%
a = shared / "traces" / "h100_videogen_2gpu_a_nsys2026.2.sqlite"
b = shared / "traces" / "h100_videogen_2gpu_b_nsys2026.2.sqlite"
moved = tracekit.diff(a, b, by="category")
moved

# %% [markdown]
# Several paths at once are read in parallel and merged, as the command line does with many inputs:
# the summary over both, then each one's rows.

# %%
both = tracekit.kernels([a, b], top=3, name="short", workers=2)
both

# %% [markdown]
# ## Memory: what was live at the peak
#
# A CUDA memory snapshot (`torch.cuda.memory._dump_snapshot`) is a pickle: tracekit reads it as
# data, never running anything from it.

# %%
snapshot = shared / "memory" / "cs336_medium_ctx128_train_step.pickle"
peak = tracekit.memory(snapshot, top=5)
peak

# %% [markdown]
# ## A timeline to look at
#
# `timeline` writes the trace as a file that [Perfetto UI](https://ui.perfetto.dev) opens: each GPU's
# streams, its idle gaps by cause, the ranges and launches of each host thread. A window keeps it small:
# here, the step's backward pass (instance 0 of that range) and the GPU work it launched.

# %%
folder = Path(tempfile.mkdtemp())
written = tracekit.timeline(trace, folder / "backward.json.gz", range="backward pass")
print(written.name, f"{written.stat().st_size / 2**10:,.0f} KiB")

# %% [markdown]
# ## A session of its own
#
# tracekit keeps what a run of commands shares (reading threads, reads started ahead, the inputs it
# must never write over) in a `Session`. A notebook uses a default one; a `with` block gives a
# session of its own, closed at the end, with its own settings (here: no cache beside the exports).

# %%
settings = tracekit.Settings.from_environment().replace(cache=False)
with tracekit.Session(settings) as session:
    syncs = tracekit.syncs(trace, top=3)
print(f"the session is closed after the block: {session.closed}")
syncs

# %% [markdown]
# ## From here
#
# - The [command line](reference/cli.md) does all of this from a shell, with tables, Markdown, CSV,
#   JSON or Parquet out (`-o k.parquet`).
# - The [API reference](reference/api.md) lists every function and its options.
