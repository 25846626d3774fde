"""Rendering: ``Result`` -> text and files (``tables``), ``Chart`` -> pictures (``plots``).

``tables``     a Result as terminal table, Markdown, CSV, JSON or Parquet; files written whole
``plots``      charts drawn with matplotlib (PNG, SVG)
``roofline_plot`` efficiency's roofline: groups as points under the GPU's roofs
``collective_plot`` collectives' picture: each rank's wait for the last peer and transfer, exposed and hidden
``notebook``   a Result as HTML for a notebook
``html``       report.html: a report's blocks and timelines as one self-contained page (``assets/``: its
               style and script in parts (tables, time axis, timeline, its lanes), inlined as one)
``colours``    one colour per kernel category and idle cause, the same in every picture
``safe_text``  names from traces made safe to print (control characters, spreadsheet formulas)
``markup``     names escaped for where they land: Markdown text and code spans, HTML, JSON in a script

This package's own module holds only the format names, so the CLI can offer them without importing
pandas or matplotlib.
"""

TEXT_FORMATS = ("table", "md", "csv", "json")
FILE_FORMATS = ("parquet",)
FORMATS = TEXT_FORMATS + FILE_FORMATS
TIME_UNITS = ("ns", "us", "ms", "s")
# The format an output file's suffix names (``-o k.csv`` writes CSV without ``--format csv``).
SUFFIX_FORMATS = {".csv": "csv", ".json": "json", ".parquet": "parquet", ".md": "md", ".txt": "table"}
