"""What a one-time cost is called: the kind a range's or an API call's name says (``name_kind``).

Each name is read past its domain ("NCCL:ncclCommInitRank", "cpu_op:aten::cudnn_convolution": the text
after "NCCL:" and "cpu_op:"), the most specific kind first:
- library setup: ``cudnnCreate``, ``cublasCreate``, ``ncclCommInitRank``, ``ncclCommSplit``, ``nccl:new_group`` ...;
- autotuning: cuDNN's algorithm search (``cudnnFind*``, ``cudnnGetConvolution*Algorithm*``) and torch.compile's
  Triton autotuning and benchmarking (``CachingAutotuner.benchmark_all_configs (dynamo_timed)``,
  ``mm_template_autotuning (dynamo_timed)``, ``inductor_do_bench_using_profiling``, a range named like
  ``triton autotune``);
- compilation: torch.compile's compile-time ranges, all named ``KEY (dynamo_timed)`` by torch 2.x
  (``_compile.compile_inner``, ``GraphLowering.run``, ``compile_file`` ...), and the names of its compile
  steps (``compile_fx``, ``entire_frame_compile``, ``backend_compile``, ``inductor_compile`` ...); never the
  ranges that run compiled code on every call (``Torch-Compiled Region``, ``CompiledFunction``,
  ``TorchDynamo Cache Lookup``);
- setup range (ranges only): a name that says setup (``init_model``, ``setup``, ``warmup``, ``load_weights``,
  ``compile``, ``build_model``, ...; cut into words at ``_``, ``.``, ``:``, spaces and case);
- module loading (API calls only): ``cuModuleLoad*``, ``cuLibraryLoad*``, ``cuLibraryUnload`` ...
"""

from __future__ import annotations

import re

SETUP_WORDS = {
    "init",
    "initialize",
    "initialise",
    "initialization",
    "setup",
    "warmup",
    "compile",
    "compilation",
    "teardown",
    "cleanup",
}
SETUP_PAIRS = {("warm", "up"), ("set", "up"), ("load", "model"), ("load", "weights"), ("load", "checkpoint")}
SETUP_PAIRS |= {("build", "model"), ("create", "model"), ("model", "init"), ("tear", "down")}
SETUP_NAME_LIMIT = 64  # characters: a setup range is named by a person
TOOL_NAME_LIMIT = 100  # characters: torch.compile's names ("CachingAutotuner.benchmark_all_configs (dynamo_timed)")
LIBRARY_SETUP = re.compile(
    r"^(cudnnCreate|cublasCreate|cublasLtCreate|cusparseCreate|cufftPlan|ncclCommInit|ncclCommSplit|"
    r"ncclCommInitRank|ncclCommInitAll|nccl:new_group|ProcessGroupNCCL)"
)
DYNAMO_TIMED = " (dynamo_timed)"  # how torch 2.x names its compile-time ranges: "GraphLowering.run (dynamo_timed)"
AUTOTUNING = re.compile(  # matched at the start (one pass over a name, as a million emit_nvtx names ask)
    r"(cudnnFind|cudnnGetConvolution\w*Algorithm)|inductor_do_bench_using_profiling$|[\w. ]*autotun[\w. ]*$",
    re.IGNORECASE,
)
AUTOTUNING_KEY = re.compile(r"[\w.]*(autotun|benchmark|_tuning|_precompiling|do_bench)", re.IGNORECASE)
COMPILATION = re.compile(
    r"(_compile|compile_fx\w*|compile_inner|entire_frame_compile|backend_compile|inductor_compile|"
    r"fx_codegen_and_compile|create_aot_dispatcher_function|OutputGraph\.call_user_compiler)$"
    r"|torch\._(dynamo|inductor)\.[\w.]*compil"
)
MODULE_CALLS = re.compile(r"^(cuModuleLoad|cuModuleUnload|cuLibraryLoad|cuLibraryUnload|cudaDeviceReset)")


def without_domain(name: str) -> str:
    """A name past what may be its domain: "NCCL:ncclCommInitRank" -> "ncclCommInitRank"; "aten::mm" as it
    is ("nccl:new_group" -> "new_group": ``name_kind`` reads both)."""
    domain, colon, text = name.partition(":")
    return text if colon and domain.isidentifier() and not text.startswith(":") else name  # never "aten::"


def name_kind(name: str, call: bool = False) -> str | None:
    """The kind of one-time cost a range's name (``call``: an API call's) says (see the module), or None."""
    text = without_domain(name)  # both are read: "nccl:new_group" is torch's name, in no domain
    if call and _either(MODULE_CALLS, name, text):
        return "module loading"
    if _either(LIBRARY_SETUP, name, text):
        return "library setup"
    if len(text) <= TOOL_NAME_LIMIT:
        if text.endswith(DYNAMO_TIMED):
            return "autotuning" if AUTOTUNING_KEY.match(text) else "compilation"
        if _either(AUTOTUNING, name, text):
            return "autotuning"
        if _either(COMPILATION, name, text):
            return "compilation"
    if not call and is_setup_name(name):
        return "setup range"
    return None


def _either(pattern: re.Pattern, name: str, text: str) -> bool:
    """Whether ``pattern`` matches the start of ``name`` or of its ``text`` past the domain."""
    return pattern.match(name) is not None or (text is not name and pattern.match(text) is not None)


def is_setup_name(name: str) -> bool:
    """Whether a range's name says setup (see the module): "init_model", "Warm-up", "loadWeights"; a long
    or structured name (a call's record: "__init__" of a module, a dict of markers) never does."""
    if len(name) > SETUP_NAME_LIMIT or any(sign in name for sign in "{}[]()/'\"=") or name.startswith("__"):
        return False
    words = [word.lower() for word in re.findall(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+", name.split("(")[0])]
    if any(word in SETUP_WORDS for word in words):
        return True
    return any(pair in SETUP_PAIRS for pair in zip(words, words[1:]))
