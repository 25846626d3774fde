"""``tracekit mcp``: tracekit's commands as tools for coding agents (the Model Context Protocol, over stdio),
confined to the folders it is given. Needs the ``mcp`` extra (the official SDK); nothing here imports it
but ``server``.

``server``    the MCP server: its tools (the registry's commands, list_traces, report, capture and bench
              with --allow-run), each call checked, then run in a process of its own
``tools``     a command's tool: its input schema from the options dataclass, a call's arguments checked
``confine``   the folders a call may read (--root) and write (--out), resolved; how much it may read
``child``     a call in a process group of its own, from a fork server; stopped whole past --timeout
``work``      what a call does in its process: the command, its tables cut to --max-rows, text, picture
``catalog``   the traces under the roots, and what each is
``programs``  capture and bench as tools (--allow-run), run as ``tracekit`` commands in --out
"""
