"""A Dask client for a scheduler address (the ``scheduler`` option): the address checked before any connection, the whole
handshake bounded, every failure one line that names the address.

Dask's own ``Client(address, timeout=...)`` bounds the connection, not the handshake: a listener that
accepts and never speaks holds it for minutes, a refused port is retried until the timeout, bytes
that are not Dask's can make it ask for exabytes, and a malformed address ends in a ValueError.
"""

from __future__ import annotations

import re
import socket
import threading
from typing import Any

from tracekit.errors import TracekitError, UsageError
from tracekit.model.options import named

HANDSHAKE_S = 20.0  # the whole connection and first exchange with a scheduler (said in the option's help)
ADDRESS = re.compile(
    r"^(?:(?P<scheme>tcp|tls|ws|wss)://)?(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):(?P<port>\d{1,5})/?$"
)


def parse_address(address: str) -> tuple[str, str, int]:
    """(scheme, host, port) of a scheduler address ("tcp://host:8786", "tls://...", "ws://...", or
    "host:8786" for tcp); UsageError for anything else."""
    found = ADDRESS.match(address.strip())
    port = int(found.group("port")) if found else 0
    if not found or not 0 < port < 65536:
        raise UsageError(
            f"{named('scheduler')} {address!r} is not a Dask scheduler address: give tcp://HOST:PORT (or tls://, ws://, "
            "wss://, or HOST:PORT), as the scheduler prints it"
        )
    return found.group("scheme") or "tcp", found.group("host").strip("[]"), port


def connect(address: str, timeout_s: float | None = None) -> Any:
    """A ``dask.distributed.Client`` of the scheduler at ``address``, or TracekitError in at most about
    ``timeout_s`` seconds: the address's form first, then a plain TCP connection (a refused or
    unreachable port is said at once), then Dask's handshake, bounded as a whole."""
    timeout_s = HANDSHAKE_S if timeout_s is None else timeout_s
    scheme, host, port = parse_address(address)
    try:
        with socket.create_connection((host, port), timeout=min(timeout_s, 5.0)):
            pass
    except OSError as error:
        reason = error.strerror or type(error).__name__
        raise TracekitError(f"cannot reach the Dask scheduler at {address}: {reason}") from None
    from dask.distributed import Client  # pyright: ignore[reportMissingImports]  (optional: the dask extra)

    outcome: dict[str, Any] = {}
    lock = threading.Lock()

    def handshake() -> None:
        try:
            client = Client(address, timeout=f"{timeout_s}s")
        except BaseException as error:  # anything the bytes from a foreign server provoke: said below
            outcome["error"] = error
            return
        with lock:
            if outcome.get("abandoned"):  # the caller gave up waiting: this late client is nobody's
                client.close()
            else:
                outcome["client"] = client

    # The handshake runs on a thread of its own so that a server that accepts and never answers cannot
    # hold the command; a thread given up on ends when that server hangs up.
    worker = threading.Thread(target=handshake, name="tracekit-dask-handshake", daemon=True)
    worker.start()
    worker.join(timeout_s + 1.0)
    with lock:
        if "client" not in outcome and "error" not in outcome:
            outcome["abandoned"] = True
    if outcome.get("abandoned"):
        raise TracekitError(
            f"the server at {address} ({scheme}) accepted the connection but no Dask scheduler answered "
            f"within {timeout_s:.0f} s"
        )
    if "error" in outcome:
        error = outcome["error"]
        what = "ran out of memory reading its reply" if isinstance(error, MemoryError) else type(error).__name__
        raise TracekitError(f"no Dask scheduler answered at {address}: {what} ({str(error)[:120]})") from None
    return outcome["client"]
