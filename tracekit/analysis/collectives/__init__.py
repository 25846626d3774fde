"""Collectives: what each collective moved, how fast, and (across ranks) who waited for whom.

``instances``  each collective on one rank: its kernel, operation, dtype, bytes and process group, from the
               kernel's name and torch.profiler's record of it
``summary``    per operation, dtype and process group: count, bytes, time, algorithm and bus bandwidth
``rank_record`` what one trace brings: each collective kernel per GPU with its launch, step, the kernel before
               it, and the parts computation covered
``exposure``   the parts of each collective computation hid, split at a moment known later (the last arrival)
``matching``   instances paired across ranks (group and seq, else order): skew, wait, transfer, the last rank
``across_ranks`` the tables: per operation and group, per rank, the collectives waited on longest and why
``exchange``   the all-to-all rank-pair matrix from torch's recorded split sizes
``patterns``   findings: a late rank, unbucketed gradient sync, all-to-all or point-to-point, slow transfer
``collectives_command``  the command, declared
"""
