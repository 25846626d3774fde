"""tracekit's version, in a module of its own: the layers below the API (capture, report) record it
without importing the package's ``__init__``, which loads the whole API."""

__version__ = "0.1.0"
