"""The Nsight Systems executable: find it, ask its version, import a .qdstrm, export SQLite.

Facts this relies on, measured with nsys 2022.4 from Debian: Debian's nsys 2022.4 cannot find its own importer, so
``nsys profile`` leaves a ``.qdstrm`` that we import with QdstrmImporter ourselves; ``nsys export``
2022.4 reads no report from 2023+ ("Version not supported").
"""

from __future__ import annotations

import glob
import hashlib
import os
import re
import shutil
import subprocess
import uuid
from pathlib import Path

from tracekit.errors import NsysExportError, NsysNotFoundError
from tracekit.session import current

# Where installers put nsys when it is not on PATH (searched in this order, newest version first).
NSYS_LOCATIONS = [
    "/opt/nvidia/nsight-systems/*/bin/nsys",
    "/opt/nvidia/nsight-systems-cli/*/bin/nsys",
    "/usr/local/cuda/bin/nsys",
    "/usr/local/cuda-*/bin/nsys",
    # Nsight Compute ships an nsys too; it records, but its install has no importer for the .qdstrm
    "/opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys",
]
IMPORTER_LOCATIONS = [
    "/usr/lib/nsight-systems/host-linux-x64/QdstrmImporter",
    "/opt/nvidia/nsight-systems/*/host-linux-x64/QdstrmImporter",
    "/opt/nvidia/nsight-systems-cli/*/host-linux-x64/QdstrmImporter",
]
INSTALL_HINT = (
    "install Nsight Systems (Debian: enable the non-free component, then `apt-get install "
    "nsight-systems nsight-systems-target`; elsewhere NVIDIA's installer from "
    "https://developer.nvidia.com/nsight-systems) or pass --nsys PATH"
)
REPORT_MAGIC = b"NVIDIA Tegra Profiler Report"  # the first bytes of .nsys-rep and .qdrep files
EXPORT_TIMEOUT_S = 600


def find_nsys(explicit: str | os.PathLike | None = None) -> str:
    """Path of the nsys executable: ``explicit``, else the session's (``--nsys``, the API's ``nsys=`` or
    $TRACEKIT_NSYS: one that is not an executable is an error), else PATH, else usual install places."""
    session = current()
    explicit = explicit or session.settings.nsys
    if explicit:
        path = shutil.which(str(explicit)) or (str(explicit) if os.access(explicit, os.X_OK) else None)
        if not path or os.path.isdir(path):
            given = f"{session.option_name('nsys')} or TRACEKIT_NSYS"
            raise NsysNotFoundError(f"{explicit} (given with {given}): no such executable; {INSTALL_HINT}")
        return path
    for candidate in (shutil.which("nsys"),):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    for pattern in NSYS_LOCATIONS:
        for candidate in sorted(glob.glob(pattern), reverse=True):
            if os.access(candidate, os.X_OK):
                return candidate
    raise NsysNotFoundError(f"Nsight Systems (nsys) is not installed or not on PATH: {INSTALL_HINT}")


def nsys_version(nsys: str) -> str:
    """Version string such as "2022.4.2.1" ("unknown" if nsys does not say)."""
    try:
        result = subprocess.run([nsys, "--version"], capture_output=True, text=True, errors="replace", timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    match = re.search(r"(\d{4}\.\d+(?:\.\d+)*)", result.stdout + result.stderr)
    return match.group(1) if match else "unknown"


def find_importer(nsys: str) -> str | None:
    """QdstrmImporter that belongs to this nsys (it looks in ../host-linux-x64 beside its real binary)."""
    real = Path(os.path.realpath(nsys))
    candidates = [real.parent.parent / "host-linux-x64" / "QdstrmImporter", real.parent / "QdstrmImporter"]
    candidates += [Path(path) for pattern in IMPORTER_LOCATIONS for path in sorted(glob.glob(pattern), reverse=True)]
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def import_qdstrm(qdstrm: Path, report: Path, nsys: str) -> Path:
    """Turn a raw capture stream into an .nsys-rep with the importer nsys could not find itself."""
    importer = find_importer(nsys)
    if importer is None:
        raise NsysExportError(
            f"{qdstrm}: nsys left a raw .qdstrm and no Nsight Systems importer (QdstrmImporter) is installed "
            f"(looked beside {nsys} and in {', '.join(IMPORTER_LOCATIONS)}); install Nsight Systems (its host "
            "part has the importer), then `QdstrmImporter -i FILE.qdstrm -o FILE.nsys-rep`"
        )
    # Imported under a name of its own, renamed into place when whole: an interrupted import leaves nothing.
    partial = report.with_name(f".{report.stem}.{uuid.uuid4().hex[:8]}.partial{report.suffix}")
    try:
        result = subprocess.run(
            [importer, "-i", str(qdstrm), "-o", str(partial)],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=EXPORT_TIMEOUT_S,
        )
        if result.returncode != 0 or not partial.exists():
            raise NsysExportError(f"QdstrmImporter could not import {qdstrm}: {_last_line(result)}")
        os.replace(partial, report)
    except BaseException:  # a failure, a timeout, Ctrl-C: nothing half-written stays behind
        partial.unlink(missing_ok=True)
        raise
    return report


def export_sqlite(report: Path, nsys: str | None = None) -> Path:
    """SQLite export of an .nsys-rep, made once and kept beside it (or in the user cache if read-only).

    An export newer than its report is reused. Raises NsysNotFoundError when nsys is missing and
    NsysExportError when it cannot read the report (a report from a newer nsys, a damaged file).
    """
    report = Path(report)
    target = _export_path(report)
    if target.exists() and target.stat().st_mtime >= report.stat().st_mtime:
        return target
    nsys = find_nsys(nsys)
    # Ends in .sqlite so that no nsys version appends the suffix itself; renamed into place when whole,
    # so a half-written export is never mistaken for a finished one.
    partial = target.with_name(f".{target.stem}.{uuid.uuid4().hex[:8]}.partial.sqlite")  # ours alone
    try:
        result = subprocess.run(
            [nsys, "export", "--type", "sqlite", "--force-overwrite", "true", "--output", str(partial), str(report)],
            capture_output=True,
            text=True,
            errors="replace",  # nsys may echo bytes of a damaged report
            timeout=EXPORT_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        partial.unlink(missing_ok=True)
        raise NsysExportError(f"nsys export of {report} did not finish in {EXPORT_TIMEOUT_S} s") from None
    except BaseException:  # Ctrl-C: nothing half-written stays behind
        partial.unlink(missing_ok=True)
        raise
    output = result.stdout + result.stderr
    if result.returncode != 0 or not partial.exists():
        partial.unlink(missing_ok=True)
        if "Version not supported" in output:
            raise NsysExportError(
                f"{report} was recorded by a newer Nsight Systems than the installed nsys {nsys_version(nsys)} can "
                "read; export it where it was recorded (`nsys export --type sqlite REPORT`) and pass the .sqlite, "
                "or give a newer nsys with --nsys PATH"
            )
        raise NsysExportError(f"nsys export could not read {report}: {_last_line(result)}")
    os.replace(partial, target)
    return target


def _export_path(report: Path) -> Path:
    beside = report.with_suffix(".sqlite")
    if current().settings.beside_inputs and os.access(report.parent, os.W_OK):
        return beside
    cache = Path(current().settings.cache_home) / "tracekit" / "exports"
    cache.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha1(str(report.resolve()).encode()).hexdigest()[:16]
    return cache / f"{report.stem}-{digest}.sqlite"


def _last_line(result: subprocess.CompletedProcess) -> str:
    lines = [line.strip() for line in (result.stderr + "\n" + result.stdout).splitlines() if line.strip()]
    errors = [line for line in lines if "error" in line.lower()]
    return (errors or lines or [f"exit status {result.returncode}"])[-1]
