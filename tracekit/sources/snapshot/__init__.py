"""CUDA memory snapshots -> ``MemoryTrace``.

``reader``  the snapshot pickle read without executing anything from it, bounded before memory is
            spent, into events, segments and frames tables
"""
