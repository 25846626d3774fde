"""What a kernel's name says about it: its base name and, for generic ones, its first template argument.

A demangled name is "<return type> <scope>::<base><<template arguments>>(<parameters>)", e.g.
"void at::native::vectorized_elementwise_kernel<(int)4, at::native::CUDAFunctor_add<float>, ...>(int,
T2, T3)". The parameter list says nothing about the work (it is where a cuDNN FFT kernel mentions
"reduced_divisor"), so rules never read it. The scoped base name usually says what the kernel does
("at::native::reduce_kernel", "flash::flash_fwd_kernel"); a generic one ("elementwise_kernel",
cutlass's "Kernel") hands the work to its first template argument that is not a number ("CUDAFunctor_add",
"cutlass_tensorop_s1688fprop_..."), which is read too. Names without templates or parameters (cuBLAS,
nvjet, Triton, hipBLASLt) are their own base name.

A kernel's short name (``short_name``, what ``--name short`` groups by) is its base name without
scopes, as nsys's shortName, except where that would name the wrapper rather than the kernel: a generic
base keeps the name of its work argument ("Kernel<cutlass_80_tensorop_s1688gemm_256x64_16x4_tn_align4>",
"vectorized_elementwise_kernel<CUDAFunctor_add>"), so two CUTLASS configurations or two elementwise
operations never fold into one row. What varies between instantiations of one kernel (data types,
sizes, tile counts given as numbers) stays out, as nsys leaves it out.
"""

from __future__ import annotations

import hashlib
import re

# Base names that say "a kernel" and leave the work to a template argument.
GENERIC_BASES = frozenset(
    {
        "kernel",
        "Kernel",
        "Kernel2",
        "elementwise_kernel",
        "vectorized_elementwise_kernel",
        "unrolled_elementwise_kernel",
        "elementwise_kernel_with_index",
        "gpu_kernel",
        "device_kernel",
        "launch_kernel",
        "kernel_entry",
        "triton_kernel",
        "index_elementwise_kernel",
        "elementwise_kernel_manual_unroll",
        "unrolled_elementwise_kernel_for_multi_outputs",
        "multi_tensor_apply_kernel",  # the functor says: an optimizer step, a foreach norm, a foreach copy
        "_kernel_agent",  # thrust: the agent's functor (fill, transform, ...)
        "trampoline_kernel",  # rocprim: the config names the algorithm (scan, reduce, transform, ...)
    }
)
# A template argument that is a number, possibly cast: "4", "(int)4", "(unsigned long)3", "(bool)0", "true",
# "(rocprim::detail::target_arch)942".
NUMBER = re.compile(r"^(?:\([\w :]+\))?-?(?:\d+[uUlL]*|true|false|0x[0-9a-fA-F]+)$")
# Template arguments that carry data, not the work: tensor-list metadata of foreach kernels, rocprim's
# default config. The work argument is the first one that is neither this nor a number.
PLUMBING = re.compile(r"(?:^|::)(?:\w*Metadata|default_config)\b")
# Functors and launchers that hand the work on to an argument as a generic base does (PyTorch's
# elementwise launchers and its binary-op adaptors): a short name looks through them.
WRAPPERS = frozenset(
    {"gpu_kernel_impl", "gpu_kernel_impl_nocast", "gpu_index_kernel", "BinaryFunctor", "AUnaryFunctor", "BUnaryFunctor"}
)
# CUTLASS's entry points: their one argument is the kernel's whole configuration.
CONFIGURED = frozenset({"Kernel", "Kernel2", "device_kernel"})
# A template argument that is a data type, which says how, not what ("float", "c10::BFloat16", "long const*").
DATA_TYPE = re.compile(
    r"^(?:const )?(?:(?:unsigned |signed )?(?:char|short|int|long(?: long)?)|unsigned|float|double|bool|void|half"
    r"|__half|__nv_bfloat16|(?:u?(?:char|short|int|long)|float|double|half)[1-4]"
    r"|(?:c10|at)::(?:Half|BFloat16|Float8_\w+|complex<[^<>]*>)|(?:std::)?u?int\d+_t)"
    r"(?: const)?\s*\**$"
)
# Scopes without a name, which look like a parameter list or a template ("(anonymous namespace)::").
ANONYMOUS_SCOPE = re.compile(r"\(anonymous namespace\)::|<unnamed>::")
# A C++ identifier: what the last part of a kernel's base name is, unlike a label such as "[CUDA memset]".
IDENTIFIER = re.compile(r"^[A-Za-z_$][\w$]*$")
# Suffixes compilers append after the parameter list (AMD's " [clone .kd]").
CLONE_SUFFIX = re.compile(r"\s*\[clone [^\]]*\]$")


def _matching_open(text: str, close_index: int, open_char: str, close_char: str) -> int:
    """Index of the bracket that opens the one closing at ``close_index`` (-1 if unbalanced)."""
    depth = 0
    for index in range(close_index, -1, -1):
        char = text[index]
        if char == close_char:
            depth += 1
        elif char == open_char:
            depth -= 1
            if depth == 0:
                return index
    return -1


def _split_top_level(text: str) -> list[str]:
    """Template arguments split at commas outside any bracket."""
    parts, depth, start = [], 0, 0
    for index, char in enumerate(text):
        if char in "<([":
            depth += 1
        elif char in ">)]":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(text[start:index].strip())
            start = index + 1
    parts.append(text[start:].strip())
    return [part for part in parts if part]


def split_name(name: str) -> tuple[str, list[str]]:
    """(scoped base name, template arguments) of a demangled kernel name. Names that do not parse are
    their own base name, with no arguments."""
    text = CLONE_SUFFIX.sub("", name.strip())
    if text.endswith(")"):  # the parameter list
        opening = _matching_open(text, len(text) - 1, "(", ")")
        if opening > 0:
            text = text[:opening].rstrip()
    arguments: list[str] = []
    if text.endswith(">"):
        opening = _matching_open(text, len(text) - 1, "<", ">")
        if opening > 0:
            arguments = _split_top_level(text[opening + 1 : -1])
            text = text[:opening]
    # Drop the return type: the base name is the last word outside any brackets ("(anonymous namespace)"
    # is part of a scope).
    depth = 0
    for index in range(len(text) - 1, -1, -1):
        char = text[index]
        if char in ">)":
            depth += 1
        elif char in "<(":
            depth -= 1
        elif char == " " and depth == 0:
            text = text[index + 1 :]
            break
    return text.strip(), arguments


def _work_argument(arguments: list[str], skip_types: bool = False) -> str:
    """The first template argument that is neither a number nor data plumbing (nor, with ``skip_types``,
    a data type): the one a generic base hands the work to; "" without one."""
    return next(
        (
            argument
            for argument in arguments
            if not NUMBER.match(argument)
            and not PLUMBING.search(argument)
            and not (skip_types and DATA_TYPE.match(argument))
        ),
        "",
    )


def rule_text(name: str) -> str:
    """The text category rules read: the scoped base name, plus, for a generic base name, its first
    template argument that is not a number."""
    base, arguments = split_name(name)
    if base.rsplit("::", 1)[-1] in GENERIC_BASES:
        return f"{base} {_work_argument(arguments)}".strip()
    return base


def short_name(name: str) -> str:
    """A kernel's short name: its base name without scopes ("gemv2T_kernel_val", "flash_fwd_kernel"), and
    for a generic base, the name of the template, class or function its work argument is, in angle
    brackets ("Kernel<cutlass_80_simt_sgemm_128x32_8x5_nn_align1>", "elementwise_kernel<MulFunctor>",
    "unrolled_elementwise_kernel<direct_copy_kernel_cuda>"). A CUTLASS entry point's argument is the
    kernel's whole configuration (tile shapes, schedule): where it has template arguments, a digest of
    them follows its name ("device_kernel<GemmUniversal#3f9a1c>"), so two configurations stay two rows
    (as it stands alone for a work argument whose name cannot be read). A name that is not a C++ declaration (a label such as "[CUDA memset]") is its own short name."""
    base, arguments = split_name(name)
    kernel = base.rsplit("::", 1)[-1]
    if not IDENTIFIER.match(kernel):
        return name
    work = _work_argument(arguments, skip_types=True) if kernel in GENERIC_BASES else ""
    if not work:
        return kernel
    shown = _work_name(work)
    shown = shown if IDENTIFIER.match(shown) else ""  # a spelling not parsed: its digest alone tells it apart
    if not shown or (kernel in CONFIGURED and "<" in work):
        spelled = re.sub(r"\s+", "", ANONYMOUS_SCOPE.sub("", work))  # nsys's and torch's demanglers space apart
        shown += "#" + hashlib.sha1(spelled.encode()).hexdigest()[:6]
    return f"{kernel}<{shown}>"


def _work_name(work: str) -> str:
    """The name of what a work argument is: a class template's name, a lambda's enclosing function
    ("direct_copy_kernel_cuda" of "at::native::direct_copy_kernel_cuda(...)::{lambda()#2}::..."), looking
    through ``WRAPPERS`` to the argument they hand the work to."""
    base, arguments = split_name(_outermost_scope(ANONYMOUS_SCOPE.sub("", work)))
    name = base.rsplit("::", 1)[-1]
    inner = _work_argument(arguments, skip_types=True) if name in WRAPPERS else ""
    return _work_name(inner) if inner else name


def _outermost_scope(text: str) -> str:
    """``text`` up to the end of its first parameter list outside brackets: the function a lambda lives
    in ("f<T>(int)" of "f<T>(int)::{lambda(int)#1}"); ``text`` itself when nothing follows one."""
    depth = 0
    for index, char in enumerate(text):
        if char in "<([{":
            depth += 1
        elif char in ">)]}":
            depth -= 1
            if char == ")" and depth == 0 and text.startswith("::", index + 1):
                return text[: index + 1]
    return text


def distinct_names(names):
    """A column of names as (codes per row, -1 where missing; the distinct names): a categorical's own, else
    factorized, so that what is decided per name is decided once (a million kernels have a few hundred)."""
    import numpy as np
    import pandas as pd

    if isinstance(names.dtype, pd.CategoricalDtype):
        return names.cat.codes.to_numpy().astype(np.int64), names.cat.categories
    return pd.factorize(names)
