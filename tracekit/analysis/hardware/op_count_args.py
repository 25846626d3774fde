"""An operator's recorded arguments, read the way torch.profiler writes them (``record_shapes=True``).

Per input, a Kineto trace records ``Input Dims`` (a list of ints for a tensor, ``[]`` for anything else or
for a 0-dim tensor, a list of lists for a TensorList in torch >= 2.4, ``[]`` for one in older versions),
``Input type`` (the tensor's dtype as C++ names it: "float", "c10::BFloat16", "long int" ...; "Scalar",
"ScalarList", "TensorList", or "" for None, strings and devices) and ``Concrete Inputs`` (scalars as text:
"1", "0.125", "False", "[2, 2]"; "" for tensors, None, strings: an einsum equation is not recorded).
An NVTX range of ``emit_nvtx(record_shapes=True)`` carries the sizes alone (see ``shapes_from_nvtx_name``).

``OpArgs.parse`` turns the three lists into typed arguments, and raises ``Unknown`` with a reason a user can
read for anything it cannot trust (negative or absurd sizes, lists of the wrong length, nested garbage).
``Traffic`` adds up bytes read and written, remembering the first tensor whose element size is unknown.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Callable
from dataclasses import dataclass

# Bytes per element of each dtype, by the name torch.profiler records (``c10::TypeMeta::name()``, i.e.
# the C++ type; on Windows int64 is "__int64"). Sub-byte and packed types count one byte per element.
# fmt: off
DTYPE_BYTES: dict[str, int] = {
    "double": 8, "float": 4, "c10::Half": 2, "c10::BFloat16": 2,
    "c10::Float8_e4m3fn": 1, "c10::Float8_e4m3fnuz": 1, "c10::Float8_e5m2": 1, "c10::Float8_e5m2fnuz": 1,
    "c10::Float8_e8m0fnu": 1, "c10::Float4_e2m1fn_x2": 1,
    "c10::complex<double>": 16, "c10::complex<float>": 8, "c10::complex<c10::Half>": 4,
    "long int": 8, "long long int": 8, "__int64": 8, "int": 4, "short int": 2, "signed char": 1,
    "long unsigned int": 8, "unsigned int": 4, "short unsigned int": 2, "unsigned char": 1, "bool": 1,
    "c10::qint32": 4, "c10::qint8": 1, "c10::quint8": 1, "c10::quint4x2": 1, "c10::quint2x4": 1,
    "c10::bits16": 2, "c10::bits8": 1, "c10::bits1x8": 1, "c10::bits2x4": 1, "c10::bits4x2": 1,
    **{f"c10::dummy_int1_7_t<{n}>": 1 for n in range(1, 8)},
    **{f"c10::dummy_uint1_7_t<{n}>": 1 for n in range(1, 8)},
}
# fmt: on
# The kind of number a dtype holds, for type promotion: 0 bool, 1 integer, 2 floating, 3 complex.
_FLOATING = {"double", "float", "c10::Half", "c10::BFloat16"} | {n for n in DTYPE_BYTES if "Float8" in n}
_COMPLEX = {n for n in DTYPE_BYTES if "complex" in n}
# ScalarType codes, as a ``dtype`` argument is recorded in Concrete Inputs ("6" is float32).
# fmt: off
SCALAR_TYPE_CODES: dict[int, str] = {
    0: "unsigned char", 1: "signed char", 2: "short int", 3: "int", 4: "long int", 5: "c10::Half", 6: "float",
    7: "double", 8: "c10::complex<c10::Half>", 9: "c10::complex<float>", 10: "c10::complex<double>", 11: "bool",
    15: "c10::BFloat16", 23: "c10::Float8_e5m2", 24: "c10::Float8_e4m3fn", 25: "c10::Float8_e5m2fnuz",
    26: "c10::Float8_e4m3fnuz", 27: "short unsigned int", 28: "unsigned int", 29: "long unsigned int",
    44: "c10::Float8_e8m0fnu", 45: "c10::Float4_e2m1fn_x2",
}
# fmt: on
# Past these a recorded size is not a real tensor's: 2**48 elements is a petabyte of bytes.
_MAX_DIM = 2**48
_MAX_ELEMENTS = 2**56
_MAX_NDIM = 32
_MAX_ARGS = 4096


class Unknown(Exception):
    """What cannot be counted, and why (the reason becomes ``OpCount.why_unknown``)."""


def category(dtype: str | None) -> int | None:
    """0 bool, 1 integer, 2 floating, 3 complex; None for an unknown name."""
    if dtype is None or dtype not in DTYPE_BYTES:
        return None
    return 3 if dtype in _COMPLEX else 2 if dtype in _FLOATING else 0 if dtype == "bool" else 1


def accumulate_dtype(dtype: str | None) -> str | None:
    """The dtype statistics are kept in for a tensor of ``dtype``: float32 for 16-bit floats, else itself."""
    return "float" if dtype in ("c10::Half", "c10::BFloat16") else dtype


def parse_value(text: object) -> object:
    """One Concrete Inputs entry as a Python value: "" is None, "False" a bool, "[2, 2]" a list of ints,
    "0.125" a float; other text (a device, an equation) stays text."""
    if not isinstance(text, str):
        return None
    text = text.strip()
    if text == "":
        return None
    if text in ("True", "False"):
        return text == "True"
    if text.startswith("[") and text.endswith("]"):
        inner = text[1:-1].strip()
        return [parse_value(item) for item in inner.split(",")] if inner else []
    if re.fullmatch(r"[+-]?\d{1,30}", text):  # longer digit strings: a float (int() refuses 4300+ digits)
        return int(text)
    try:
        return float(text)
    except ValueError:
        return text


def freeze(dims: object, types: object, concrete: object) -> tuple[tuple | None, tuple | None, tuple | None]:
    """The three recorded lists as nested tuples of plain ints and strings: hashable (a cache's key) and
    fully determining the count; Unknown when they are not lists of that form."""
    # scalar arguments not of the recorded form count as not recorded: an op that needs none (mm) is still
    # counted, one that needs them says they are unknown
    try:
        scalars = _freeze_texts(concrete, "scalar arguments")
    except Unknown:
        scalars = None
    return _freeze_dims(dims), _freeze_texts(types, "dtypes"), scalars


def _freeze_dims(dims: object) -> tuple | None:
    if dims is None:
        return None
    if not isinstance(dims, (list, tuple)) or len(dims) > _MAX_ARGS:
        raise Unknown("shapes not understood")
    frozen = []
    for entry in dims:
        if not isinstance(entry, (list, tuple)) or len(entry) > _MAX_ARGS:
            raise Unknown("shapes not understood")
        if all(isinstance(item, (list, tuple)) for item in entry) and entry:  # a TensorList's shapes
            frozen.append(tuple(tuple(_integer(size) for size in shape) for shape in entry))
        else:
            frozen.append(tuple(_integer(size) for size in entry))
    return tuple(frozen)


def _integer(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise Unknown("shapes not understood")
    return int(value)


def _freeze_texts(texts: object, what: str) -> tuple | None:
    if texts is None:
        return None
    if not isinstance(texts, (list, tuple)) or not all(isinstance(text, str) for text in texts):
        raise Unknown(f"{what} not understood")
    return tuple(texts)


def _shape(value: object) -> tuple[int, ...]:
    """A recorded size list as a tuple, or Unknown when it is not one a tensor can have."""
    if not isinstance(value, (list, tuple)) or len(value) > _MAX_NDIM:
        raise Unknown("shapes not understood")
    if not all(type(size) is int for size in value):
        raise Unknown("shapes not understood")
    if any(size < 0 or size > _MAX_DIM for size in value) or math.prod(value) > _MAX_ELEMENTS:
        raise Unknown("sizes out of range")
    return tuple(value)  # type: ignore[arg-type]


def numel(shape: tuple[int, ...]) -> int:
    return math.prod(shape)


def broadcast(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    """The shape tensors of ``shapes`` broadcast to (NumPy's rules), or Unknown."""
    ndim = max((len(shape) for shape in shapes), default=0)
    out = []
    for axis in range(ndim):
        sizes = {shape[axis - ndim + len(shape)] for shape in shapes if axis - ndim + len(shape) >= 0} - {1}
        if len(sizes) > 1:
            raise Unknown("shapes do not broadcast")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


@dataclass(frozen=True)
class Arg:
    """One recorded input. ``kind``: "tensor", "tensors" (a TensorList: ``shapes``) or "value" (a scalar,
    a list of scalars or None: ``value``, parsed from Concrete Inputs). ``dtype`` is the recorded name
    (None when not recorded); ``itemsize`` its bytes per element (None when not known)."""

    kind: str
    shape: tuple[int, ...] = ()
    shapes: tuple[tuple[int, ...], ...] = ()
    dtype: str | None = None
    itemsize: int | None = None
    value: object = None

    @property
    def elements(self) -> int:
        return numel(self.shape) if self.kind == "tensor" else sum(numel(shape) for shape in self.shapes)


@dataclass(frozen=True)
class OpArgs:
    """An operator's inputs in order, and whether scalars (Concrete Inputs) and dtypes were recorded."""

    args: tuple[Arg, ...]
    values_recorded: bool
    dtypes_recorded: bool
    element_bytes: int | None = None

    @classmethod
    def parse(cls, dims: object, types: object, concrete: object, element_bytes: int | None) -> OpArgs:
        if dims is None:
            raise Unknown("no shapes recorded")
        if not isinstance(dims, (list, tuple)) or len(dims) > _MAX_ARGS:
            raise Unknown("shapes not understood")
        if types is not None and (not isinstance(types, (list, tuple)) or len(types) != len(dims)):
            raise Unknown("dtypes do not match the shapes")
        if concrete is not None and (not isinstance(concrete, (list, tuple)) or len(concrete) != len(dims)):
            raise Unknown("scalar arguments do not match the shapes")
        if element_bytes is not None and (type(element_bytes) is not int or not 0 < element_bytes <= 64):
            element_bytes = None
        args = tuple(
            _arg(sizes, None if types is None else types[i], None if concrete is None else concrete[i], element_bytes)
            for i, sizes in enumerate(dims)
        )
        return cls(args, concrete is not None, types is not None, element_bytes)

    def __len__(self) -> int:
        return len(self.args)

    def get(self, index: int) -> Arg | None:
        return self.args[index] if 0 <= index < len(self.args) else None

    def tensor(self, index: int) -> Arg:
        """The tensor at ``index``, or Unknown."""
        arg = self.get(index)
        if arg is None or arg.kind != "tensor":
            raise Unknown(f"input {index} is not a tensor")
        return arg

    def optional_tensor(self, index: int) -> Arg | None:
        """The tensor at ``index``, or None (an optional tensor that was not given)."""
        arg = self.get(index)
        return arg if arg is not None and arg.kind == "tensor" else None

    def tensors(self, index: int) -> tuple[tuple[int, ...], ...]:
        """The shapes of the TensorList at ``index``, or Unknown. An empty one is taken for one whose shapes
        were not recorded (torch < 2.4 writes [] for every TensorList)."""
        arg = self.get(index)
        if not self.dtypes_recorded:
            raise Unknown("TensorList inputs are flattened in NVTX sizes")
        if arg is None or arg.kind != "tensors":
            raise Unknown(f"input {index} is not a recorded TensorList")
        if not arg.shapes:
            raise Unknown("TensorList shapes not recorded")
        return arg.shapes

    def value(self, index: int, default: object = None) -> object:
        """The scalar at ``index`` (``default`` when the call passed fewer inputs), or Unknown when scalars
        were not recorded (NVTX ranges)."""
        arg = self.get(index)
        if arg is None:
            return default
        if not self.values_recorded:
            raise Unknown("scalar arguments not recorded")
        return arg.value if arg.kind == "value" else None

    def flag(self, index: int, default: bool = False) -> bool:
        value = self.value(index, default)
        return default if value is None else value is True or (type(value) in (int, float) and value != 0)

    def int_list(self, index: int | None, length: int, default: int, name: str) -> tuple[int, ...]:
        """An int-list argument (stride, padding ...) of ``length`` entries; one entry stands for all;
        ``default`` for each when the op has no such argument (``index`` None) or the call left it out."""
        value = [default] * length if index is None else self.value(index, [default] * length)
        if type(value) is int:
            value = [value]
        if not isinstance(value, list) or not all(type(item) is int for item in value):
            raise Unknown(f"{name} not recorded")
        if len(value) == 1:
            value = value * length
        if len(value) != length:
            raise Unknown(f"{name} has {len(value)} entries for {length} dimensions")
        return tuple(value)  # type: ignore[arg-type]

    def dtype_code(self, index: int) -> str | None:
        """A ``dtype`` argument (a ScalarType code) as a dtype name; None when not given."""
        value = self.value(index)
        if type(value) is not int:
            return None
        if value not in SCALAR_TYPE_CODES:
            raise Unknown(f"dtype code {value} not known")
        return SCALAR_TYPE_CODES[value]

    def traffic(self) -> Traffic:
        return Traffic(self.dtypes_recorded)

    def read_all(self, traffic: Traffic, first: int = 0, end: int | None = None) -> None:
        """Read every tensor and TensorList input (of positions ``first`` to ``end``) once."""
        for arg in self.args[first:end]:
            traffic.tensor(arg)

    def write(self, traffic: Traffic, elements: int, dtype: str | None) -> None:
        """Write ``elements`` of ``dtype`` (the caller's ``element_bytes`` when dtypes were not recorded)."""
        traffic.add(elements, self.itemsize_of(dtype), dtype)

    def itemsize_of(self, dtype: str | None) -> int | None:
        """Bytes per element of a dtype name; the caller's ``element_bytes`` when dtypes were not recorded."""
        if not self.dtypes_recorded:
            return self.element_bytes
        return DTYPE_BYTES.get(dtype) if dtype is not None else None


def _arg(sizes: object, dtype: object, text: object, element_bytes: int | None) -> Arg:
    if dtype is not None and not isinstance(dtype, str):
        raise Unknown("dtypes not understood")
    value = parse_value(text)
    if dtype == "TensorList":
        if not isinstance(sizes, (list, tuple)):
            raise Unknown("shapes not understood")
        return Arg("tensors", shapes=tuple(_shape(shape) for shape in sizes), itemsize=element_bytes)
    if dtype is None:  # NVTX: sizes alone; [] is a scalar, a None or a 0-dim tensor, which weighs nothing
        shape = _shape(sizes)
        return Arg("tensor", shape=shape, itemsize=element_bytes) if shape else Arg("value", value=value)
    if dtype in DTYPE_BYTES:
        return Arg("tensor", shape=_shape(sizes), dtype=dtype, itemsize=DTYPE_BYTES[dtype])
    shape = _shape(sizes)
    if shape:  # sizes with a dtype name this table does not know: a tensor of unknown element size
        return Arg("tensor", shape=shape, dtype=dtype)
    return Arg("value", value=value)


@dataclass
class Traffic:
    """Bytes read plus bytes written; ``missing`` says why the total is not known (None when it is).
    ``dtypes_recorded`` False (NVTX) makes a missing element size read "dtype not recorded"."""

    dtypes_recorded: bool = True
    total: int = 0
    missing: str | None = None

    def add(self, elements: int, itemsize: int | None, dtype: str | None = None) -> None:
        if itemsize is not None:
            self.total += elements * itemsize
        elif self.dtypes_recorded and dtype:
            self.unknown(f"dtype {dtype!r} not known")
        else:
            self.unknown("dtype not recorded")

    def tensor(self, arg: Arg | None, elements: int | None = None) -> None:
        """One tensor (or TensorList) read or written once: all of it, or ``elements`` of it."""
        if arg is None or arg.kind == "value":
            return
        if arg.kind == "tensors" and arg.itemsize is None and self.dtypes_recorded:
            self.unknown("TensorList dtypes not recorded")
            return
        self.add(arg.elements if elements is None else elements, arg.itemsize, arg.dtype)

    def unknown(self, reason: str) -> None:
        self.missing = self.missing or reason

    @property
    def bytes(self) -> float | None:
        return None if self.missing else float(self.total)


@dataclass
class Count:
    """What a formula found: FLOPs (None with ``why`` when they cannot be known) and the bytes moved."""

    flops: float | None
    traffic: Traffic
    why: str | None = None


# How each module states its rules: op name -> (family, formula).
Formula = Callable[[OpArgs], Count]
Rules = dict[str, tuple[str, Formula]]


# An NVTX range of ``emit_nvtx(record_shapes=True)`` (torch/csrc/profiler/util.cpp ``getNvtxStr``):
# "NAME[, seq = N][, op_id = N][, sizes = [[..], ..]][, input_op_ids = [(op,out), ..]]". Its sizes hold one
# list per input ([] for a non-tensor); a TensorList is flattened into one entry per tensor.
_NVTX_FIELDS = re.compile(r", (?:seq|op_id|sizes|input_op_ids) = ")
_NVTX_SIZES = re.compile(r", sizes = (\[(?:\[[-\d, ]*\](?:, )?)*\])")


def shapes_from_nvtx_name(text: str) -> tuple[str, list[list[int]]] | None:
    """The operator name and input sizes an ``emit_nvtx(record_shapes=True)`` range name carries, or None
    when it carries no sizes (ranges of other tools, or emit_nvtx without ``record_shapes``)."""
    if not isinstance(text, str):
        return None
    sizes = _NVTX_SIZES.search(text)
    if sizes is None:
        return None
    first = _NVTX_FIELDS.search(text)
    name = text[: first.start()] if first else text
    dims = [
        [int(size) for size in entry.split(",") if size.strip()]
        for entry in re.findall(r"\[([-\d, ]*)\]", sizes.group(1)[1:-1])
    ]
    return name, dims
