"""What the tests share: builders of inputs with exactly known numbers (``nsys_builder``, ``kineto_builder``,
``snapshot_builder``, ``steps``, ``small_export``), rows of a Result (``api_tables``), a stand-in for nsys (``fake_nsys``), nsys stats run
for comparison (``nsys_stats``) and where the real data lies (``paths``). ``tests/`` is on the path
(pytest's ``pythonpath``), so tests import ``helpers.x``."""
