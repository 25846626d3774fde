"""Collectives: what each collective moved, how fast, and (across ranks) who waited for whom.

``instances``  each collective on one rank: its kernel, operation, dtype, bytes and process group, from the
               kernel's name and torch.profiler's record of it
``summary``    per operation, dtype and process group: count, bytes, time, algorithm and bus bandwidth
"""
