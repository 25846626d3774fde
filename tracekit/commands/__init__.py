"""The command registry: every analysis command (declared once, in a module of its own beside its
analysis), and run the same way from anywhere.

``registry``      the command modules, and other packages' commands (entry points): ``COMMANDS``, ``command``
``execute``       ``run_command``: a command on paths or open traces, one or many
``command_line``  how options are written as flags; the command line that reproduces a Result
``read_ahead``    reads started before an input opens (``kernels``)
``advice``        ``advise`` with the memory snapshot that goes with its trace

The command line, ``tracekit report``, the Python API (``tracekit.api``) and many-input workers all
come here; nothing here imports pandas until a command runs.
"""

from tracekit.commands.execute import run_command
from tracekit.commands.registry import COMMANDS, Command, command

__all__ = ["COMMANDS", "Command", "command", "run_command"]
