"""One colour per kernel category, and per phase of a step, the same in every picture tracekit draws
(PNG or HTML): matmul is blue, forward orange, wherever they appear. Categories outside the list (a rule
added later) and phases named otherwise get a colour from their name, stable from run to run."""

from __future__ import annotations

import zlib

CATEGORY_COLOURS = {
    "matmul": "#4c72b0",
    "attention": "#dd8452",
    "elementwise": "#55a868",
    "softmax": "#c44e52",
    "normalization": "#8172b3",
    "reduction": "#937860",
    "memory": "#da8bc3",
    "communication": "#8c8c8c",
    "optimizer": "#ccb974",
    "convolution": "#64b5cd",
    "fft": "#2f4b7c",
    "other": "#bcbcbc",
}
SPARE = ["#a05195", "#f95d6a", "#ffa600", "#003f5c", "#665191", "#d45087"]
IDLE_COLOURS = {
    "sync": "#7b1113",  # dark red: apart from the optimizer phase's red
    "host not launching": "#ff9896",
    "launch overhead": "#ffbb78",
    "other stream or device": "#c7c7c7",
    "dependency not in trace": "#9edae5",
    "other": "#dbdb8d",
}


def category_colour(category: str) -> str:
    """The colour of ``category`` (hex)."""
    return CATEGORY_COLOURS.get(category) or SPARE[zlib.crc32(category.encode()) % len(SPARE)]


# The phases of a step, as the step-times chart draws them (matplotlib's first colours, the step first).
PHASE_COLOURS = {
    "step": "#1f77b4",
    "forward": "#ff7f0e",
    "backward": "#2ca02c",
    "optimizer": "#d62728",
    "zero_grad": "#9467bd",
}


def phase_colour(phase: str) -> str:
    """The colour of a step's phase (hex); a phase named by its range spec gets one from its name."""
    return PHASE_COLOURS.get(phase) or SPARE[zlib.crc32(phase.encode()) % len(SPARE)]


# The host lanes of report.html's timeline: a thread's ranges (NVTX, record_function), its CPU operators and
# its CUDA API calls (olive: apart from every kernel category, idle cause and phase).
HOST_COLOURS = {"range": "#6b6ecf", "CPU op": "#8c6d31", "CUDA API": "#637939"}
# The rest of the timeline's marks: steps (alternate steps lighter), the memory lane, a launch arrow.
TIMELINE_COLOURS = {
    "step": "#6baed6",
    "other step": "#9ecae1",
    "memory allocated": "#da8bc3",
    "memory reserved": "#555555",
    "launch arrow": "#111111",
}
