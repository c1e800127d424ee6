"""An HTTP/2-only server is named as such by the preflight, not "not reachable" (#53).

Imitated: a server speaking only HTTP/2 with prior knowledge (h2c, as gRPC-style and some inference servers
run) reads an HTTP/1.1 request as a bad connection preface and answers with binary frames, its SETTINGS frame
then a GOAWAY (PROTOCOL_ERROR), and closes. The tiny server here does exactly that on a real socket.
"""

from __future__ import annotations

import socket
import threading

import pytest

from specbench.preflight import PreflightError, check_server

SETTINGS = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"  # empty SETTINGS frame on stream 0
GOAWAY = b"\x00\x00\x08\x07\x00\x00\x00\x00\x00" + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x01"  # PROTOCOL_ERROR


def test_an_http2_only_server_is_named_as_one() -> None:
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                conn.recv(4096)
                conn.sendall(SETTINGS + GOAWAY)

    threading.Thread(target=serve, daemon=True).start()
    try:
        with pytest.raises(PreflightError) as caught:
            check_server(f"http://127.0.0.1:{listener.getsockname()[1]}", "server", timeout=5.0, total=10.0)
    finally:
        listener.close()
    message = str(caught.value)
    assert "HTTP/2-only server?" in message and "not reachable" not in message and "\n" not in message
