"""Options and helpers of `tracekit bench`: list options (``--ctx 128 256``), sizes with Ki/Mi suffixes,
choices, the device and TF32 options, progress reporting and CPU-sized defaults."""

from __future__ import annotations

import re
import sys

import click

from tracekit.run_config import ATTENTION_IMPLEMENTATIONS, ATTENTIONS, MODES, OPTIMIZERS
from tracekit.run_config import DTYPE_NAMES as DTYPES

SIZE_PATTERN = re.compile(r"^\d+(Ki|Mi|Gi)?$")
# Options that take a list, and which words can be their values (so `--ctx 128 256 small` stops at small).
LIST_VALUES = {
    "--ctx": SIZE_PATTERN,
    "--warmup": SIZE_PATTERN,
    "--batch": SIZE_PATTERN,
    "--head-dim": SIZE_PATTERN,
    "--seq": SIZE_PATTERN,
    "--params": SIZE_PATTERN,
    "--size": SIZE_PATTERN,
    "--mode": set(MODES),
    "--dtype": set(DTYPES),
    "--attention": set(ATTENTIONS),
    "--impl": set(ATTENTION_IMPLEMENTATIONS + OPTIMIZERS),
}


def expand_lists(args: list[str]) -> list[str]:
    """["--ctx", "128", "256"] -> ["--ctx", "128", "--ctx", "256"]; commas split too."""
    expanded, index = [], 0
    while index < len(args):
        word = args[index]
        index += 1
        if word not in LIST_VALUES:
            expanded.append(word)
            continue
        accepts = LIST_VALUES[word]
        values = []
        while index < len(args) and all(_accepts(accepts, part) for part in args[index].split(",") if part):
            values += [part for part in args[index].split(",") if part]
            index += 1
        expanded += [item for value in values for item in (word, value)] or [word]
    return expanded


def _accepts(accepts, word: str) -> bool:
    return bool(accepts.match(word)) if hasattr(accepts, "match") else word in accepts


def parse_size(text: str) -> int:
    """ "64Ki" -> 65536; plain integers as they are."""
    factor = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30}
    for suffix, scale in factor.items():
        if text.endswith(suffix):
            return int(text[:-2]) * scale
    return int(text)


def sizes(least: int = 1):
    """A click callback reading a list of sizes, each at least ``least``; repeated values run once."""

    def check(ctx, param, values):
        try:
            parsed = [parse_size(part) for value in values for part in str(value).split(",") if part]
        except ValueError as error:
            raise click.BadParameter(str(error)) from None
        small = [value for value in parsed if value < least]
        if small:
            raise click.BadParameter(f"{', '.join(map(str, small))}: each must be at least {least}")
        return tuple(dict.fromkeys(parsed))

    return check


def choices(allowed):
    def check(ctx, param, values):
        parts = tuple(part for value in values for part in str(value).split(",") if part)
        unknown = [part for part in parts if part not in allowed]
        if unknown:
            raise click.BadParameter(f"{', '.join(unknown)}: choose from {', '.join(allowed)}")
        return parts

    return check


def device_option(function):
    return click.option(
        "--device",
        type=click.Choice(["auto", "cpu", "cuda", "mps"]),
        default="auto",
        show_default=True,
        help="auto: CUDA if present, then MPS, then the CPU",
    )(function)


def tf32_option(function):
    return click.option(
        "--tf32",
        type=click.Choice(["on", "off"]),
        default="off",
        show_default=True,
        help="TF32 tensor cores for float32 matmuls and convolutions (CUDA, Ampere and newer); recorded in every row",
    )(function)


def progress(total: int, label: str):
    """A first line saying how many configurations will run, then a progress bar with an ETA on standard
    error for sweeps of more than one point."""
    click.echo(f"{label}: {total:,} configuration{'s' if total != 1 else ''} to run", err=True)
    if total <= 1:
        return None
    return click.progressbar(length=total, label=label, file=sys.stderr, show_eta=True, show_pos=True)


def cpu_sized(context: click.Context, device: str, grid: dict[str, tuple | int]) -> list[str]:
    """On a CPU, the grid options the user left at their GPU-sized defaults become ``grid``'s small
    values (in ``context.params``): a default sweep then takes about a minute, not ten. Returns the note
    that says so (empty when nothing changed)."""
    from workloads.bench import resolve_device

    if resolve_device(device).type != "cpu":
        return []
    changed = {
        name: values
        for name, values in grid.items()
        if context.get_parameter_source(name) == click.core.ParameterSource.DEFAULT
    }
    context.params.update(changed)
    if not changed:
        return []

    def words(values: tuple | int) -> str:
        return " ".join(map(str, values)) if isinstance(values, tuple) else str(values)

    shown = ", ".join(f"--{name.replace('_', '-')} {words(values)}" for name, values in changed.items())
    return [f"a CPU-sized grid (the defaults are sized for a GPU): {shown}; give them to choose"]
