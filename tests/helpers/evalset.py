"""The evaluation set's script (benchmarks/evalset/fetch.py), loaded as a module: its manifest reader and
where it puts the traces (benchmarks/data/evalset/, git-ignored), for the tests of the set and of the
script itself."""

from __future__ import annotations

import importlib.util
import sys
from functools import cache
from types import ModuleType

from helpers.paths import ROOT

FETCH_SCRIPT = ROOT / "benchmarks" / "evalset" / "fetch.py"


@cache
def fetch_module() -> ModuleType:
    """benchmarks/evalset/fetch.py as a module (benchmarks/ is scripts, not a package)."""
    spec = importlib.util.spec_from_file_location("evalset_fetch", FETCH_SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module
