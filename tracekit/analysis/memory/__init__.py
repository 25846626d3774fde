"""Memory snapshots: what was live at the peak, who allocated it, and what it is for.

``replay``  the allocator's events replayed: live bytes over time, the peak, allocations live at it
``frames``  stack frames cleaned and shortened; the user's frame that allocated
``roles``   parameters, optimizer state, gradients, activations, temporaries at the peak
``lifetimes``  memory from before the trace read by when and where it was freed (zero_grad's gradients,
            a retained previous iteration), and optimizer tensors replacing it
``tables``  the ``memory`` command's tables, the comparison of two snapshots, the timeline chart
``on_trace``  allocated and reserved bytes placed on a trace's clock (timelines beside GPU work)
``memory_command``  the command, declared
"""
