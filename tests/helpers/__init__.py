"""What the tests share: builders of inputs with exactly known numbers (``nsys_builder``, ``kineto_builder``,
``snapshot_builder``, ``steps``, ``small_export``, ``sequence_trace``), rows of a Result (``api_tables``), a
stand-in for nsys (``fake_nsys``), nsys stats run for comparison (``nsys_stats``), HolisticTraceAnalysis run
under pandas 3 (``hta_patches``) and on a folder parsed once per process (``hta_loaded``), each real
torch.profiler file decoded once for tests that run many commands on it (``parsed_once``) and where the real
data lies (``paths``). ``tests/`` is on the path (pytest's ``pythonpath``), so tests import ``helpers.x``."""
