"""A TLS front for a plain HTTP server on 127.0.0.1, with a self-signed certificate made for the test by the
system's openssl: the https:// server a test needs, whose certificate no system store trusts."""

from __future__ import annotations

import contextlib
import socket
import ssl
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path


def self_signed_cert(folder: Path) -> tuple[Path, Path]:
    """(certificate, key) for CN and subjectAltName 127.0.0.1, valid for a day."""
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True, timeout=60)
    return cert, key


def _pump(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)


def _serve(listener: socket.socket, context: ssl.SSLContext, backend: tuple[str, int],
           stopping: threading.Event) -> None:
    while not stopping.is_set():
        try:
            raw, _ = listener.accept()
        except OSError:
            return
        try:
            client = context.wrap_socket(raw, server_side=True)
        except (OSError, ssl.SSLError):  # a client that refused our certificate: what one test wants
            raw.close()
            continue
        upstream = socket.create_connection(backend, timeout=30)
        for a, b in ((client, upstream), (upstream, client)):
            threading.Thread(target=_pump, args=(a, b), daemon=True).start()


@contextlib.contextmanager
def tls_front(backend_url: str, cert: Path, key: Path) -> Iterator[str]:
    """``https://127.0.0.1:PORT`` relaying to ``backend_url`` (http://127.0.0.1:PORT) while the block runs."""
    host, port = backend_url.split("://", 1)[1].rstrip("/").split(":")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(256)
    stopping = threading.Event()
    thread = threading.Thread(target=_serve, args=(listener, context, (host, int(port)), stopping), daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stopping.set()
        listener.close()
        thread.join(timeout=5)
