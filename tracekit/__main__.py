"""``python -m tracekit``: the same as the ``tracekit`` command (and ``python -m tracekit.cli``)."""

from tracekit.cli import run

run()
