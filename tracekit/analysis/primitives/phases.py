"""Phases, one definition for every command: the ranges that are a step's forward pass, backward pass,
optimizer step (and zero_grad, where a trace marks it).

Given phases (range specs) are taken as they are, each its own label, but for a phase's word itself
(``forward``, ``backward``, ``optimizer``, ``zero_grad``): it names the ranges finding takes for that
phase, so phases "forward,backward" on a trace of "## forward ##" ranges mean those. Without given
phases (the default, ``options.DEFAULT_PHASES``), each phase is found by the names real traces use,
the first rule that matches deciding:
1. the word itself: a range named ``forward`` (tracekit's workloads, ``annotate``);
2. an annotation holding the word on its own (not inside another word, identifier or hyphenated word)
   and no other phase's word: "forward pass", "## forward ##", "DistributedDataParallel.forward", "##
   optimizer ##", "optimizer step"; not "forward-backward", "pre_forward" or "forward/backward"; of
   those, the one with most time. Operators are not annotations: emit_nvtx's "op, seq = ..." ranges,
   torch's ``cpu_op`` and GPU-side (``gpu``) ranges, names over 60 characters;
3. the ranges PyTorch itself records: the autograd engine's ``autograd::engine::evaluate_function: *``
   (backward), ``Optimizer.step#*`` and ``Optimizer.zero_grad#*`` (record_function names), in the
   CPU-side domain that holds most of them (torch 1.8 records them as ``cpu_op``).
A phase keeps its word as its label whatever range names it, so two traces that name it differently
still line up in ``diff`` and ``compare``; a note says which names were taken.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from tracekit.analysis.primitives.selection import select
from tracekit.model.derived import per_trace
from tracekit.model.option_fields import DEFAULT_PHASES
from tracekit.model.options import named
from tracekit.model.range_specs import EMIT_NVTX_SUFFIX, LITERAL
from tracekit.model.trace import Trace

WORDS = ("forward", "backward", "optimizer", "zero_grad")
# a glob that finds the word's annotations (read with them, then matched as a word on its own)
SEARCH = {"forward": "*orward*", "backward": "*ackward*", "optimizer": "*ptimizer*", "zero_grad": "*zero_grad*"}
RECORDED = {
    "backward": "autograd::engine::evaluate_function: *",
    "optimizer": "Optimizer.step#*",
    "zero_grad": "Optimizer.zero_grad#*",
}
OPERATOR_DOMAINS = ("cpu_op", "gpu")
LONGEST_ANNOTATION = 60


@dataclass(frozen=True)
class Phases:
    """The phases to use: (label, spec) pairs, and what a reader should be told about them."""

    chosen: tuple[tuple[str, str], ...]
    note: str | None = None


def choose_phases(trace: Trace, phases: Sequence[str] | None, domain: str | None = None, how: str = "") -> Phases:
    """The phases of ``trace``: found by name when ``phases`` are the default (None too); else each
    given spec as it is, but for a phase's word itself ("forward", "backward", "optimizer",
    "zero_grad"), which names the ranges finding would take for it ("## forward ##" where the trace
    has no range named forward), so naming a phase means what finding it means. ``how``: how a user
    names phases, for the note (default: the option's name)."""
    how = how or named("phases")
    if phases is not None and tuple(phases) != tuple(DEFAULT_PHASES):
        if not any(spec in WORDS for spec in phases):
            return Phases(tuple((spec, spec) for spec in phases))
        found = dict(_found_once(trace, domain, how).chosen)
        pairs = tuple((spec, found.get(spec, spec) if spec in WORDS else spec) for spec in phases)
        taken = [(word, spec) for word, spec in pairs if spec != word]
        return Phases(pairs, f"phases found by their range names: {_said(taken)}" if taken else None)
    return _found_once(trace, domain, how)


def _found_once(trace: Trace, domain: str | None, how: str) -> Phases:
    """The phases found by name, and what to tell of them (``how``: how a user names phases)."""
    pairs = _found(trace, domain)
    if all(spec == word for word, spec in pairs) and {word for word, _ in pairs} >= set(DEFAULT_PHASES):
        return Phases(pairs)  # the default names themselves: nothing to say
    if not pairs:
        return Phases(
            (),
            f"no range of this trace names a phase (forward, backward, optimizer): only the whole trace "
            f"is broken down; name its phases with {how} (`tracekit ranges` lists its range names)",
        )
    absent = [word for word in DEFAULT_PHASES if word not in dict(pairs)]
    return Phases(
        pairs,
        f"phases found by their range names: {_said(pairs)}"
        + (f"; no {', '.join(absent)}" if absent else "")
        + f" (name others with {how})",
    )


@per_trace
def _found(trace: Trace, domain: str | None) -> tuple[tuple[str, str], ...]:
    """(phase word, spec) of each phase found by its range names in ``domain``, once per trace and domain."""
    exact = select(trace, list(WORDS), domain=domain)
    chosen = {word: word for word in WORDS if exact.matches[word].any()}
    missing = [word for word in WORDS if word not in chosen]
    if missing:
        specs = [SEARCH[word] for word in missing] + [f"*{RECORDED[word]}" for word in missing if word in RECORDED]
        found = select(trace, specs, domain=domain)
        for word in missing:
            name = _annotation(found.of(SEARCH[word]), word, domain)
            if name is not None:
                chosen[word] = LITERAL + name
            elif word in RECORDED:
                recorded = _recorded(found.of(f"*{RECORDED[word]}"), RECORDED[word], domain)
                if recorded is not None:
                    chosen[word] = recorded
    return tuple((word, chosen[word]) for word in WORDS if word in chosen)


def _said(pairs: Sequence[tuple[str, str]]) -> str:
    """Which ranges each phase is: "forward = '## forward ##', backward = ..." for a note."""
    return ", ".join(
        f"{word} = {spec.removeprefix(LITERAL)!r}"
        + (" (PyTorch's own ranges: each one an instance)" if spec.endswith(RECORDED.get(word, "\0")) else "")
        for word, spec in pairs
    )


def _annotation(ranges: pd.DataFrame, word: str, domain: str | None = None) -> str | None:
    """The annotation (rule 2) holding ``word`` on its own with most time among ``ranges``; None if none."""
    if ranges.empty:
        return None
    codes, names = pd.factorize(ranges["name"].astype(str).to_numpy(dtype=object))
    domains = ranges["domain"].astype(str).to_numpy(dtype=object)
    total = np.bincount(codes, weights=ranges["duration"].to_numpy(dtype=np.float64), minlength=len(names))
    operator = np.zeros(len(names), dtype=bool)
    operator[codes[np.isin(domains, OPERATOR_DOMAINS)]] = True
    others = [_alone(other) for other in WORDS if other != word]
    best, most = None, -1.0
    for index, name in enumerate(str(name) for name in names):
        if operator[index] or len(name) > LONGEST_ANNOTATION or EMIT_NVTX_SUFFIX.search(name):
            continue
        if any(other.search(name) for other in others):  # "forward/backward": not one phase's name
            continue
        if _alone(word).search(name) and total[index] > most:
            best, most = name, float(total[index])
    if best is not None and domain is not None and best.startswith(f"{domain}:"):
        best = best[len(domain) + 1 :]  # within a domain, specs match the text without its "domain:"
    return best


def _alone(word: str) -> re.Pattern:
    """``word`` on its own: not inside a word, an identifier or a hyphenated word ("forward-backward")."""
    return re.compile(rf"(?<![A-Za-z0-9_-]){re.escape(word)}(?![A-Za-z0-9_-])", re.IGNORECASE)


def _recorded(ranges: pd.DataFrame, glob: str, domain: str | None) -> str | None:
    """The spec of PyTorch's own ranges (rule 3): ``glob`` in the CPU-side domain holding most of them
    (its "domain:" prefix unless it is the default one, or the one asked for); None without any."""
    domains = ranges["domain"].astype(str)
    domains = domains[domains != "gpu"]
    if domains.empty:
        return None
    most = str(domains.value_counts().index[0])
    return glob if not most or domain is not None else f"{most}:{glob}"
