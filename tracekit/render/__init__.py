"""Rendering: ``Result`` -> text and files (``tables``), ``Chart`` -> pictures (``plots``).

This package's own module holds only the format names, so the CLI can offer them without importing
pandas or matplotlib.
"""

TEXT_FORMATS = ("table", "md", "csv", "json")
FILE_FORMATS = ("parquet",)
FORMATS = TEXT_FORMATS + FILE_FORMATS
TIME_UNITS = ("ns", "us", "ms", "s")
