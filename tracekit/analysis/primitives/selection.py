"""Range selection from a Trace, in one place: an analysis calls ``select(trace, specs)`` once; it reads
only the ranges the specs can match (the reader may filter at the source with ``Pattern.chunks``),
nests them among themselves, and answers, per spec, which of them match. The grammar is
``tracekit.model.range_specs``; matching on a table of ranges ``tracekit.model.range_names``."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from difflib import get_close_matches

import numpy as np
import pandas as pd

from tracekit.errors import UsageError
from tracekit.model.range_names import domain_names, inside_another, match
from tracekit.model.range_specs import DEFAULT_DOMAIN, spec_patterns
from tracekit.model.trace import Trace

CLOSE_NAMES = 3  # per spec, the names difflib finds closest (ratio 0.6 or more)
CLOSE_AMONG = 5_000  # of the most frequent names (emit_nvtx names every call apart: millions)


@dataclass
class Selection:
    """What a list of specs selects from one trace.

    ``ranges`` holds every range any spec names, nested among themselves; ``matches[spec]`` is each
    spec's mask over it.
    """

    ranges: pd.DataFrame
    matches: dict[str, np.ndarray]

    def of(self, spec: str) -> pd.DataFrame:
        """The instances of one spec."""
        return self.ranges.loc[self.matches[spec]]

    def any(self) -> bool:
        return any(mask.any() for mask in self.matches.values())

    def chosen(self) -> pd.DataFrame:
        """Instances matching any spec, with an ``outermost`` column (not nested in another match)."""
        matched = np.zeros(len(self.ranges), dtype=bool)
        for mask in self.matches.values():
            matched |= mask
        chosen = self.ranges[matched].copy()
        chosen["outermost"] = ~inside_another(self.ranges, matched)[matched]
        return chosen


def select(trace: Trace, specs: Sequence[str], load_too: Collection[str] = (), domain: str | None = None) -> Selection:
    """Read the ranges ``specs`` can match (with the tables in ``load_too``, concurrently) and match each
    spec (within ``domain`` when given)."""
    patterns = spec_patterns(specs)
    ranges = trace.load_together(list(load_too), patterns) if load_too else trace.ranges_named(patterns)
    assert ranges is not None
    return Selection(ranges, {spec: match(ranges, spec, domain) for spec in specs})


def select_ranges(trace: Trace, specs: Sequence[str], domain: str | None = None) -> pd.DataFrame:
    """Instances matching any of ``specs`` (with ``outermost``); UsageError listing the trace's range
    names when nothing matches."""
    selection = select(trace, specs, domain=domain)
    if not selection.any():
        where = f" in domain {domain}" if domain else ""
        raise UsageError(
            f"no NVTX range matches {', '.join(specs)}{where} in {trace.name}; {known_names(trace, domain, specs)}"
        )
    return selection.chosen()


def known_names(trace: Trace, domain: str | None = None, near: Sequence[str] = ()) -> str:
    """A few of the trace's range names (of ``domain`` when given, as specs then match them), most
    frequent first, for error messages, after those close to a spec in ``near`` (a misspelt name); why
    there are none when there are none."""
    names, allowed = domain_names(trace.ranges, domain)
    counts = names.loc[allowed].value_counts()
    counts = counts[counts > 0]
    if counts.empty:
        return no_ranges_reason(trace, domain)
    shown = ", ".join(_clipped(str(name)) for name in counts.index[:8])
    where = f" in domain {domain}" if domain else ""
    known = [str(name) for name in counts.index[:CLOSE_AMONG]]
    close = list(dict.fromkeys(name for spec in near for name in get_close_matches(spec, known, CLOSE_NAMES)))
    said = f"close names: {', '.join(_clipped(name) for name in close)}; " if close else ""
    return said + f"its ranges{where} include: {shown}" + (" ..." if len(counts) > 8 else "")


SHOWN_NAME_CHARS = 60  # an error is one line: a range named by a Python dict repr runs to kilobytes


def _clipped(name: str) -> str:
    return name if len(name) <= SHOWN_NAME_CHARS else name[: SHOWN_NAME_CHARS - 1] + "…"


def no_ranges_reason(trace: Trace, domain: str | None = None) -> str:
    """Why a trace offers no range to match: every NVTX row was unusable, the domain holds none, or
    nothing was annotated."""
    dropped = trace.dropped("ranges")
    if trace.ranges.empty and dropped:
        return f"all {dropped:,} of its NVTX ranges were left out: unusable values (see the note)"
    if domain is not None and not trace.ranges.empty:
        domains = sorted({DEFAULT_DOMAIN if not d else str(d) for d in trace.ranges["domain"].unique()})
        return f"it has no ranges in domain {domain}; its domains: {', '.join(domains)}"
    return "it has no NVTX ranges (capture with nsys's NVTX trace, `nsys profile -t nvtx`, and annotate the code)"
