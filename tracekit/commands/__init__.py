"""The command registry: every analysis command declared once, and run the same way from anywhere.

``registry``      ``COMMANDS``: each command's options, inputs, run, part and merger
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
