"""Options of a command, declared once: a frozen dataclass whose fields say their kind, default, help
and bounds, validated when the options are made (``Options.__post_init__``).

The same declaration serves the Python API (keyword arguments), the command line (each field becomes
a click option: ``tracekit.cli.analyses``) and many-input workers (options are small and picklable). A
message names an option by its parameter name (``top``) through ``named``, which the command line
turns into its flag (``--top``): nothing below the CLI writes a flag. The standard library only.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import MISSING, Field, dataclass, field, fields
from typing import Any

from tracekit.errors import UsageError
from tracekit.model.range_specs import parse_spec, split_specs
from tracekit.session import current


def named(parameter: str) -> str:
    """How messages name the option ``parameter`` (the API: as is; the command line: ``--flag``)."""
    return current().option_name(parameter)


# Parameters whose flag is not their name with dashes (the rest: ``flag_name``).
FLAGS = {"ranges": "--range", "use_dask": "--dask", "fmt": "--format", "start_ms": "--start", "end_ms": "--end"}


def flag_name(parameter: str) -> str:
    """The command line's flag of an option named by its parameter name: "same_thread" -> "--same-thread"."""
    return FLAGS.get(parameter) or "--" + parameter.replace("_", "-")


class OptionError(UsageError):
    """An option's value is not one the option takes."""


# Times are kept as int64 nanoseconds: a time option's value, finite as it may be (1e308 ms), must fit.
NS_PER = {"ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
LONGEST_NS = 2**63 - 1


def longest_time_error(name: str, value: float, unit: str) -> OptionError | None:
    """The error for a time option ``name`` whose ``value`` in ``unit`` is past int64 nanoseconds, else None."""
    longest = LONGEST_NS / NS_PER[unit]
    if abs(value) <= longest:
        return None
    return OptionError(f"{named(name)} is at most {longest:.3g} {unit} (int64 ns), not {value:g}")


@dataclass(frozen=True)
class Declared:
    """What a field declares besides its default.

    ``kind``: flag, choice, int, float, text (not blank), any text or specs. ``choices``: the values a choice takes.
    ``minimum``: the smallest number taken. ``metavar``: what the value is called in help.
    ``one_input``: only with one input (not over many). ``cli``: offered on the command line.
    ``repeat``: (specs) the flag is given once per spec, not as one comma-separated list.
    ``unit``: a number's unit, said in help.
    """

    kind: str
    help: str  # another option named "{name}": ``help_text`` fills it in
    choices: tuple[Any, ...] = ()
    minimum: float | None = None
    metavar: str | None = None
    one_input: bool = False
    cli: bool = True
    repeat: bool = False
    unit: str = ""


def help_text(declared: Declared, option_name: Callable[[str], str] = lambda name: name) -> str:
    """The help of an option, other options named by ``option_name`` (default: parameter names)."""

    class Names(dict):
        def __missing__(self, key: str) -> str:
            return option_name(key)

    return declared.help.format_map(Names())


def _field(default: Any, declared: Declared) -> Any:
    return field(default=default, metadata={"declared": declared})


def flag(help: str, one_input: bool = False, cli: bool = True) -> Any:
    """A yes/no option, False unless given."""
    return _field(False, Declared("flag", help, one_input=one_input, cli=cli))


def choice(default: Any, choices: Sequence[Any], help: str, one_input: bool = False) -> Any:
    """One of ``choices`` (None among them: the option may be left out)."""
    return _field(default, Declared("choice", help, tuple(choices), one_input=one_input))


def whole(
    default: int | None, help: str, minimum: int | None = 1, metavar: str | None = None, one_input: bool = False
) -> Any:
    """A whole number of at least ``minimum`` (None: left out, when that is the default)."""
    return _field(default, Declared("int", help, minimum=minimum, metavar=metavar, one_input=one_input))


def number(
    default: float | None, help: str, minimum: float | None = 0.0, unit: str = "", metavar: str | None = None
) -> Any:
    """A number (int or float) of at least ``minimum`` (None: left out, when that is the default)."""
    return _field(default, Declared("float", help, minimum=minimum, unit=unit, metavar=metavar))


def text(help: str, metavar: str = "NAME", one_input: bool = False, cli: bool = True, blank: bool = False) -> Any:
    """A non-blank text (None: left out); ``blank``: any text, its reader judges it."""
    return _field(None, Declared("any text" if blank else "text", help, metavar=metavar, one_input=one_input, cli=cli))


def specs(default: Sequence[str], help: str, repeat: bool = False, one_input: bool = False) -> Any:
    """Range specs (``model.range_specs``): a sequence, or one text of comma-separated specs."""
    return _field(
        tuple(default),
        Declared("specs", help, metavar="SPEC" if repeat else "SPEC,...", one_input=one_input, repeat=repeat),
    )


def declared_fields(options: type[Options] | Options) -> list[tuple[Field, Declared]]:
    """The declared fields of an options class, in order."""
    return [(item, item.metadata["declared"]) for item in fields(options) if "declared" in item.metadata]


def default_of(item: Field) -> Any:
    return item.default if item.default is not MISSING else None


@dataclass(frozen=True)
class Options:
    """Base of every command's options: each field is checked, and normalized, when made."""

    def __post_init__(self) -> None:
        for item, declared in declared_fields(self):
            value = _checked(item.name, getattr(self, item.name), declared, default_of(item))
            object.__setattr__(self, item.name, value)
        self.check()

    def check(self) -> None:
        """Rules between fields (a subclass's); OptionError when they are broken."""

    def one_input_only(self) -> list[str]:
        """The options given that take one input only (their parameter names)."""
        return [
            item.name
            for item, declared in declared_fields(self)
            if declared.one_input and getattr(self, item.name) != default_of(item)
        ]

    def changed(self) -> dict[str, Any]:
        """The options that differ from their defaults, by parameter name."""
        return {
            item.name: getattr(self, item.name)
            for item, _ in declared_fields(self)
            if getattr(self, item.name) != default_of(item)
        }


def _checked(name: str, value: Any, declared: Declared, default: Any) -> Any:
    """``value`` as the option keeps it; OptionError naming the option when it is not one it takes."""
    if value is None and declared.kind == "specs":
        return default  # specs left out: the default ones
    if value is None and default is None and declared.kind != "flag":
        return None
    kind = declared.kind
    if kind == "flag":
        if not isinstance(value, bool):
            raise OptionError(f"{named(name)} is True or False, not {value!r}")
        return value
    if kind == "choice":
        if value not in declared.choices:
            shown = ", ".join(repr(choice) if choice is None else str(choice) for choice in declared.choices)
            raise OptionError(f"{named(name)} {value!r} is not one of {shown}")
        return value
    if kind in ("int", "float"):
        return _number(name, value, declared)
    if kind == "any text":
        if not isinstance(value, str):
            raise OptionError(f"{named(name)} is a text, not {value!r}")
        return value
    if kind == "text":
        if not isinstance(value, str):
            raise OptionError(f"{named(name)} is a name (text), not {value!r}")
        if not value.strip():
            raise OptionError(f"{named(name)} is empty: give a name, or leave the option out")
        return value
    if kind == "specs":
        return _specs(name, value)
    raise AssertionError(f"unknown option kind {kind}")


def _number(name: str, value: Any, declared: Declared) -> int | float:
    integer = declared.kind == "int"
    wrong_type = isinstance(value, bool) or not isinstance(value, (int, float) if not integer else int)
    if wrong_type and integer and hasattr(value, "__index__") and not isinstance(value, bool):
        value, wrong_type = int(value), False  # a numpy integer
    if wrong_type or (isinstance(value, float) and not math.isfinite(value)):
        what = "a whole number" if integer else "a number"
        raise OptionError(f"{named(name)} is {what}, not {value!r}")
    if declared.minimum is not None and value < declared.minimum:
        raise OptionError(f"{named(name)} is at least {declared.minimum:g}, not {value!r}")
    too_long = longest_time_error(name, value, declared.unit) if declared.unit in NS_PER else None
    if too_long is not None:
        raise too_long
    return value


def _specs(name: str, value: Any) -> tuple[str, ...]:
    """A tuple of specs, each parsed once here (a bad spec is said now, before any file is read)."""
    if isinstance(value, str):
        try:
            found = tuple(split_specs(value))
        except UsageError as error:
            raise OptionError(f"{named(name)}: {error}") from None
    elif isinstance(value, Sequence) and all(isinstance(spec, str) for spec in value):
        found = tuple(value)
    else:
        raise OptionError(f"{named(name)} is range specs (a text, or a list of texts), not {value!r}")
    for spec in found:
        if not spec.strip():
            raise OptionError(f"{named(name)} holds an empty spec: give a range name such as forward")
        try:
            parse_spec(spec)
        except UsageError as error:
            raise OptionError(f"{named(name)}: {error}") from None
    return found
