"""The Python API: one function per analysis command, with the command's name and its options as keyword
arguments, returning a ``Result`` of DataFrames with raw values (``tracekit/__init__.py`` exports them).

``commands``  the analysis functions, one per built-in command: generated from the commands' declarations
``generate``  writes ``commands`` (``python -m tracekit.api.generate``); other packages' commands' functions
``result``    ``Result``, and ``call``: a command run with the keywords a function was given
``reading``   ``open_trace``, ``open_snapshot``, and the types the functions take
``timeline``  traces as one Chrome trace-event file for Perfetto

A command another installed package declares (``tracekit.commands`` entry points) is a function here too,
made when first asked for (``__getattr__``).
"""

from typing import TYPE_CHECKING

from tracekit.api import commands as _commands
from tracekit.api.commands import *  # noqa: F403  (the analysis functions: commands.__all__ names them)
from tracekit.api.reading import open_snapshot, open_trace
from tracekit.api.result import Result
from tracekit.api.timeline import timeline

__all__ = ["Result", "open_snapshot", "open_trace", "timeline"]
__all__ += _commands.__all__

if not TYPE_CHECKING:  # (type checkers would otherwise take any name for a function of this module)

    def __getattr__(name: str):
        """The function of a command another installed package declares (``generate.installed_function``)."""
        if name.startswith("_"):
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        from tracekit.api.generate import installed_function

        return installed_function(name)
