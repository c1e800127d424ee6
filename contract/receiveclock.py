"""Which clock a run's chunk times are on: the kernel's receive stamps where the platform gives them, else the
load process's event loop.

Linux stamps each TCP segment when it reaches the socket (``SO_TIMESTAMPNS``; a ``recvmsg`` returns the stamp
of the last segment it read as ancillary data), so a chunk read late by a busy load process still carries the
time it arrived. Python's socket module does not name the option; its number (35, also the control message's
type) is asm-generic's, as on x86-64 and arm64; a few other architectures number it differently, and read
without stamps. TLS sockets give no ancillary data. The load side (``locustfiles.transport``) and the books
(``shapes``) both ask here, so a step's line says the clock its users measured on.
"""

from __future__ import annotations

import platform
import sys
from urllib.parse import urlsplit

#: whether this platform stamps TCP segments on receipt for ``recvmsg``
KERNEL_STAMPS = sys.platform.startswith("linux") and platform.machine() in ("x86_64", "aarch64", "arm64")
SO_TIMESTAMPNS = SCM_TIMESTAMPNS = 35


def receive_clock(asked: str, base_url: str) -> str:
    """The clock a run's chunk times are on: "kernel" where asked and given (Linux, plain TCP), else "user"."""
    return "kernel" if asked == "kernel" and KERNEL_STAMPS and urlsplit(base_url).scheme == "http" else "user"
