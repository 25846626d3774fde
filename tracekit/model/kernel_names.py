"""What a kernel's name says about it: its base name and, for generic ones, its first template argument.

A demangled name is "<return type> <scope>::<base><<template arguments>>(<parameters>)", e.g.
"void at::native::vectorized_elementwise_kernel<(int)4, at::native::CUDAFunctor_add<float>, ...>(int,
T2, T3)". The parameter list says nothing about the work (it is where a cuDNN FFT kernel mentions
"reduced_divisor"), so rules never read it. The scoped base name usually says what the kernel does
("at::native::reduce_kernel", "flash::flash_fwd_kernel"); a generic one ("elementwise_kernel",
cutlass's "Kernel") hands the work to its first template argument that is not a number ("CUDAFunctor_add",
"cutlass_tensorop_s1688fprop_..."), which is read too. Names without templates or parameters (cuBLAS,
nvjet, Triton, hipBLASLt) are their own base name.
"""

from __future__ import annotations

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
# A template argument that is a number, possibly cast: "4", "(int)4", "(unsigned long)3", "(bool)0", "true".
NUMBER = re.compile(r"^(?:\([\w ]+\))?-?(?:\d+[uUlL]*|true|false|0x[0-9a-fA-F]+)$")
# Template arguments that carry data, not the work: tensor-list metadata of foreach kernels, rocprim's
# default config. The work argument is the first one that is neither this nor a number.
PLUMBING = re.compile(r"(?:^|::)(?:\w*Metadata|default_config)\b")
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


def rule_text(name: str) -> str:
    """The text category rules read: the scoped base name, plus, for a generic base name, its first
    template argument that is not a number."""
    base, arguments = split_name(name)
    if base.rsplit("::", 1)[-1] in GENERIC_BASES:
        first = next(
            (argument for argument in arguments if not NUMBER.match(argument) and not PLUMBING.search(argument)), ""
        )
        return f"{base} {first}".strip()
    return base
