"""The ``short_name`` column of a GPU-op table, from its ``name`` column, the same way for every reader:
a kernel's ``kernel_names.short_name`` of its demangled name (not nsys's shortName, which names CUTLASS's
``Kernel`` and PyTorch's ``elementwise_kernel`` rather than the kernel), a copy's or a set's name itself."""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracekit.model.kernel_names import short_name


def short_name_column(names: pd.Categorical, kernel: np.ndarray) -> pd.Categorical:
    """The short names of ``names`` (a GPU-op table's name column; ``kernel``: which rows are kernels),
    computed once per distinct name; names that shorten alike share a category. Rows without a name
    stay without one."""
    codes = np.asarray(names.codes)
    of_kernel = np.zeros(len(names.categories), dtype=bool)
    of_kernel[np.unique(codes[kernel & (codes >= 0)])] = True
    shown = [
        short_name(str(text)) if kernel_name else str(text) for text, kernel_name in zip(names.categories, of_kernel)
    ]
    labels, inverse = np.unique(np.asarray(shown, dtype=object), return_inverse=True)
    short_codes = np.where(codes >= 0, inverse.reshape(-1)[np.maximum(codes, 0)], -1).astype(np.int32)
    return pd.Categorical.from_codes(short_codes, categories=pd.Index(labels, dtype=object))
