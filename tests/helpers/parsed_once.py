"""Each torch.profiler file decoded once while a block runs, for tests that run many commands on the same
real traces: every command still opens its own Trace and builds every table from the decoded columns
(what a fresh read does after its decode); only the JSON decode, about a second per real file, is shared.

The decoded columns are never changed after the decode (each table is built from copies: ``gathered``
concatenates), so sharing them changes no result. Keyed by the file's identity and modification time:
a file written again is decoded again. Not for tests of the decode itself, nor of damaged files."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def kineto_decoded_once() -> Iterator[None]:
    """While the block runs, tracekit's torch.profiler reader decodes each file once (in this process)."""
    from tracekit.sources.kineto import reader

    decoded: dict[tuple, object] = {}
    decode = reader._parse

    def once(path: Path):
        stat = os.stat(path)
        key = (os.path.realpath(path), stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)
        if key not in decoded:
            decoded[key] = decode(path)
        return decoded[key]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(reader, "_parse", once)
        yield
