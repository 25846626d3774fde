"""FLOPs and bytes of copies, fills, factories and views.

Copies (copy_, _to_copy, to, clone, contiguous, cat, index_select ...): no FLOPs; the source read and the
result written once, each in its own dtype. Fills (fill_, zero_, zeros, ones, full ...): written once, no
FLOPs. Factories of computed values (randn, rand, randint, arange): one FLOP per value, written once.
Views (view, reshape, transpose, expand ...) and allocations (empty, resize_ ...): nothing moved; a
reshape that copies shows the copy as its own clone child.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from tracekit.analysis.hardware.op_count_args import Arg, Count, OpArgs, Rules, Unknown, numel

VIEWS = (
    "view _unsafe_view reshape _reshape_alias as_strided t transpose permute expand expand_as squeeze unsqueeze "
    "slice select narrow detach detach_ alias unflatten flatten split split_with_sizes unsafe_split chunk "
    "unbind view_as numpy_T lift_fresh resolve_conj resolve_neg result_type broadcast_tensors diagonal movedim "
    "swapaxes real imag view_as_real view_as_complex set_ record_stream empty empty_like empty_strided "
    "new_empty new_empty_strided resize_ is_nonzero is_pinned as_strided_ squeeze_ unsqueeze_ t_ transpose_"
).split()


# Factories: (position of the size list, or None for the *_like ones that take self's; position of the
# dtype code; FLOPs per element: 1 for random numbers, 0 for a constant). The default dtype is float32.
FACTORIES: dict[str, tuple[int | None, int, int]] = {
    "zeros": (0, 1, 0),
    "ones": (0, 1, 0),
    "full": (0, 2, 0),
    "scalar_tensor": (None, 1, 0),
    "zeros_like": (None, 1, 0),
    "ones_like": (None, 1, 0),
    "full_like": (None, 2, 0),
    "new_zeros": (1, 2, 0),
    "new_ones": (1, 2, 0),
    "new_full": (1, 3, 0),
    "rand": (0, 1, 1),
    "randn": (0, 1, 1),
    "rand_like": (None, 1, 1),
    "randn_like": (None, 1, 1),
    "randint": (1, 2, 1),
}


def factory(base: str) -> Callable[[OpArgs], Count]:
    """A new tensor written once: its size from the recorded size list (self's for *_like, one element for
    scalar_tensor), its dtype from the dtype code (self's, else float32, when none is given)."""
    size_at, dtype_at, flops = FACTORIES[base]

    def count(a: OpArgs) -> Count:
        # randint(low, high, size, dtype ...) has one more leading input than randint(high, size, dtype ...);
        # randn(size, generator, dtype ...) one more than randn(size, dtype ...)
        shift = int((base == "randint" and len(a) == 7) or (base in ("rand", "randn") and len(a) == 6))
        if base == "scalar_tensor":
            shape: tuple[int, ...] = ()
        elif size_at is None:
            shape = a.tensor(0).shape
        else:
            size = a.value(size_at + (shift if base == "randint" else 0))
            if not isinstance(size, list) or not all(type(n) is int and n >= 0 for n in size):
                raise Unknown("factory size not recorded")
            shape = tuple(size)
        like = a.optional_tensor(0)
        default = "long int" if base == "randint" else like.dtype if like is not None else "float"
        dtype = a.dtype_code(dtype_at + shift) or default
        traffic = a.traffic()
        a.write(traffic, numel(shape), dtype)
        return Count(float(flops * numel(shape)), traffic)

    return count


# arange's overloads by their number of inputs: how many leading bounds (end; start, end; start, end, step)
# precede the dtype code, or the ``out`` tensor (arange.out(end, out), arange.start_out(start, end, step, out)).
ARANGE_BOUNDS = {5: 1, 6: 2, 7: 3, 2: 1, 4: 3}


def arange(a: OpArgs) -> Count:
    """arange(end, dtype ...), arange(start, end, dtype ...), arange(start, end, step, dtype ...) and their
    out forms: one FLOP per value, each written once (int64 for integer bounds, else float32, unless a
    dtype or an out tensor says otherwise)."""
    leading = ARANGE_BOUNDS.get(len(a))
    bounds = [a.value(index) for index in range(leading or 0)]
    if leading is None or not all(type(b) in (int, float) for b in bounds):
        raise Unknown("arange bounds not recorded")
    start, end, step = ([0, *bounds, 1] if leading == 1 else [*bounds, 1])[:3]
    if step == 0:
        raise Unknown("arange bounds not recorded")
    elements = max(0, math.ceil((end - start) / step))
    out = a.optional_tensor(len(a) - 1)
    default = "long int" if all(type(b) is int for b in bounds) else "float"
    traffic = a.traffic()
    a.write(traffic, elements, out.dtype if out is not None else a.dtype_code(leading) or default)
    return Count(float(elements), traffic)


def slice_backward(a: OpArgs) -> Count:
    """slice_backward(grad, input_sizes, dim, start, end, step), select_backward(grad, input_sizes, dim,
    index): a zero gradient as large as the input, the incoming gradient copied into it."""
    grad = a.tensor(0)
    sizes = a.value(1)
    if not isinstance(sizes, list) or not all(type(n) is int and n >= 0 for n in sizes):
        raise Unknown("input_sizes not recorded")
    traffic = a.traffic()
    traffic.tensor(grad)
    a.write(traffic, numel(tuple(sizes)), grad.dtype)
    return Count(0.0, traffic)


def fill(a: OpArgs) -> Count:
    """fill_(self, value), zero_(self): written once, no arithmetic."""
    self = a.tensor(0)
    traffic = a.traffic()
    traffic.tensor(self)
    return Count(0.0, traffic)


def view(a: OpArgs) -> Count:
    return Count(0.0, a.traffic())


def _copy(a: OpArgs, source: Arg, dtype: str | None) -> Count:
    """``source`` read, as many elements written in ``dtype`` (None: the target dtype is not known)."""
    traffic = a.traffic()
    traffic.tensor(source)
    if dtype is None and a.dtypes_recorded:
        traffic.unknown("scalar arguments not recorded")
    else:
        a.write(traffic, source.elements, dtype)
    return Count(0.0, traffic)


def copy_(a: OpArgs) -> Count:
    """copy_(self, src, non_blocking): src read (broadcast into self), self written."""
    self, source = a.tensor(0), a.tensor(1)
    traffic = a.traffic()
    traffic.tensor(source)
    traffic.tensor(self)
    return Count(0.0, traffic)


def to_copy(a: OpArgs) -> Count:
    """_to_copy(self, dtype, layout, device, ...): read in self's dtype, written in the new one."""
    self = a.tensor(0)
    return _copy(a, self, _target_dtype(a, 1, self))


def _target_dtype(a: OpArgs, index: int, self: Arg) -> str | None:
    """The dtype a copy writes: its dtype argument, else self's; None when scalars were not recorded
    but dtypes were (torch < 2.1 traces): the write is then unknown, the read still counted."""
    if not a.values_recorded:
        return None if a.dtypes_recorded else self.dtype
    return a.dtype_code(index) or self.dtype


def to(a: OpArgs) -> Count:
    """to(self, dtype, non_blocking, copy, memory_format), to(self, device, dtype, ...), to(self, other, ...),
    to(self, dtype, layout, device, pin_memory, non_blocking, copy, memory_format): a copy, except the
    dtype form asking for self's own dtype without ``copy``, which returns self. (A device is not recorded,
    so the other forms count as the copy they make when they make one.)"""
    self = a.tensor(0)
    other = a.optional_tensor(1)
    if other is not None:  # to(self, other, ...), type_as(self, other)
        return view(a) if other.dtype == self.dtype else _copy(a, self, other.dtype)
    if not a.values_recorded:
        return _copy(a, self, _target_dtype(a, 1, self))
    dtype = a.dtype_code(2 if len(a) == 6 else 1)
    if len(a) == 5 and dtype in (None, self.dtype) and not a.flag(3):
        return view(a)
    return _copy(a, self, dtype or self.dtype)


def clone(a: OpArgs) -> Count:
    self = a.tensor(0)
    return _copy(a, self, self.dtype)


def concatenate(a: OpArgs) -> Count:
    """cat(tensors, dim), stack: every tensor read, the result written (in the tensors' dtype)."""
    a.tensors(0)
    traffic = a.traffic()
    traffic.tensor(a.get(0))
    traffic.tensor(a.get(0))  # the result: as many elements as all the inputs
    return Count(0.0, traffic)


def local_scalar(a: OpArgs) -> Count:
    """item(), _local_scalar_dense(): one element read back to the host."""
    self = a.tensor(0)
    traffic = a.traffic()
    traffic.tensor(self, 1)
    return Count(0.0, traffic)


def index_select(a: OpArgs) -> Count:
    """index_select(self, dim, index): the selected slices read and written, the index read."""
    self, index = a.tensor(0), a.tensor(2)
    dim = a.value(1)
    if type(dim) is not int or not self.shape or not -len(self.shape) <= dim < len(self.shape):
        raise Unknown("index_select dim not recorded")
    rows = self.shape[dim]
    out = self.elements // rows * index.elements if rows else 0
    traffic = a.traffic()
    traffic.tensor(index)
    traffic.tensor(self, out)
    a.write(traffic, out, self.dtype)
    return Count(0.0, traffic)


RULES: Rules = {
    **{f"aten::{name}": ("other", view) for name in VIEWS},
    **{name: ("other", view) for name in ("detach", "detach_")},  # autograd's own records
    **{f"aten::{name}": ("elementwise" if FACTORIES[name][2] else "copy", factory(name)) for name in FACTORIES},
    "aten::arange": ("elementwise", arange),
    **{
        name: ("copy", formula)
        for name, formula in {
            "aten::fill_": fill,
            "aten::zero_": fill,
            "aten::copy_": copy_,
            "aten::_to_copy": to_copy,
            "aten::to": to,
            "aten::type_as": to,
            "aten::lift_fresh_copy": clone,
            "aten::pin_memory": clone,
            "aten::_pin_memory": clone,
            "aten::slice_backward": slice_backward,
            "aten::select_backward": slice_backward,
            "aten::clone": clone,
            "aten::contiguous": clone,
            "aten::cat": concatenate,
            "aten::concat": concatenate,
            "aten::concatenate": concatenate,
            "aten::stack": concatenate,
            "aten::item": local_scalar,
            "aten::_local_scalar_dense": local_scalar,
            "aten::index_select": index_select,
        }.items()
    },
}
