"""The API's ``Result`` (a Result that prints as the command line does and shows as HTML in a notebook),
and ``call``: a command of the registry run with the keywords an API function was given.

Nothing heavy is imported until a function runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields
from typing import Any

from tracekit.model.option_fields import ManyOptions
from tracekit.model.result import Result as _Result


class Result(_Result):
    """What every analysis returns: named tables of raw values (``result["kernels"]``, ``to_pandas()``),
    the column units (``units()``), notes that the figures need beside them (``notes``) and charts
    (``charts``). ``print(result)`` shows it as the command line does; a notebook shows it as HTML."""

    @classmethod
    def of_result(cls, result: _Result) -> Result:
        return cls(result.tables, result.notes, result.charts)

    def __str__(self) -> str:
        from tracekit.render.tables import render_text

        return render_text(self, "table")

    def __repr__(self) -> str:
        shapes = ", ".join(f"{table.name} ({len(table.frame):,} rows)" for table in self.tables) or "no tables"
        return f"<tracekit.Result: {shapes}; {len(self.notes)} note{'s' if len(self.notes) != 1 else ''}>"

    def _repr_html_(self) -> str:
        from tracekit.render.notebook import result_html

        return result_html(self)


MANY_FIELDS = frozenset(field.name for field in fields(ManyOptions))


def call(name: str, inputs: Any | Sequence[Any], arguments: dict[str, Any]) -> Result:
    """Command ``name`` on ``inputs``. ``arguments``: the calling function's ``locals()``, split here into
    the command's options and (commands over many inputs) how the inputs are read; the rest are the
    inputs themselves. The functions (``api.commands``, generated) only declare their keywords."""
    from tracekit.commands.execute import run_command
    from tracekit.commands.registry import command

    spec = command(name)
    own = {field.name for field in fields(spec.options)}
    options = spec.options(**{key: value for key, value in arguments.items() if key in own})
    many = ManyOptions(**{key: value for key, value in arguments.items() if key in MANY_FIELDS})
    return Result.of_result(run_command(spec, inputs, options, many if spec.takes_many else None))
