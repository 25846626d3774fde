"""Errors the library raises. Only ``tracekit.cli`` turns them into exit codes and one-line messages.

Every message is written for the user: it says what is wrong with which file and what to do about it.
"""


class TracekitError(Exception):
    """Base class of every error tracekit reports to a user."""


class InputNotFoundError(TracekitError):
    """A file or folder named on the command line does not exist."""


class NotAnExportError(TracekitError):
    """A file is not an Nsight Systems export (not SQLite, or SQLite without nsys tables)."""


class NoGpuDataError(TracekitError):
    """An export holds no GPU activity (a CPU-only capture, or one without ``--trace=cuda``)."""


class NothingToAnalyseError(NoGpuDataError):
    """A trace holds GPU work but none of what a command looks at (no collective kernels on a single GPU): a
    report leaves that command's section out."""


class NsysNotFoundError(TracekitError):
    """Nsight Systems is needed (to export or capture) and is not installed."""


class NsysExportError(TracekitError):
    """``nsys export`` failed, for example on a report made by a newer Nsight Systems."""


class InvalidTraceError(TracekitError):
    """An export loaded, but its contents break an invariant (end before start, dangling ids)."""


class SnapshotError(TracekitError):
    """A memory snapshot cannot be read: truncated, not a snapshot, or an unsafe pickle."""


class CaptureError(TracekitError):
    """A capture (workload under nsys) failed."""


class UsageError(TracekitError):
    """Options that do not fit together or name something the trace does not have."""


class MissingExtraError(TracekitError):
    """An optional part is needed and not installed (torch, which the workloads extra brings)."""


class PeaksFileError(TracekitError):
    """A GPU peaks file cannot be used: not JSON, too large, or an entry with a field missing or out of range."""
