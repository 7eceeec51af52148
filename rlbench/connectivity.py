"""Whether a server answers at all, asked before a library that would retry it for minutes (Ray, W&B)."""

from __future__ import annotations

import socket


def connection_error(host: str, port: int, timeout_s: float) -> str | None:
    """Why no TCP connection opens to host:port within timeout_s (e.g. "Connection refused"), or None once
    one opens. A refused port or an unknown host answers in milliseconds; a silent network costs timeout_s."""
    try:
        socket.create_connection((host, port), timeout=timeout_s).close()
    except OSError as error:
        return str(error.strerror or error)
    return None
