"""A server whose info pages come gzip-encoded is identified from their text, not named "model default" (#53)."""

from __future__ import annotations

import gzip
import json
from http.server import ThreadingHTTPServer

from specbench.locustfiles.serverinfo import identify
from tests.tinyservers import QuietHandler, serving

PAGES = {"/v1/models": {"object": "list", "data": [{"id": "gz-model-53", "owned_by": "vllm"}]},
         "/server_info": {"speculative_algorithm": "EAGLE3", "max_running_requests": 7,
                          "served_model_name": "gz-model-53"}}


class _Gzip(QuietHandler):
    def do_GET(self) -> None:
        page = PAGES.get(self.path)
        body = gzip.compress(json.dumps(page).encode()) if page is not None else b""
        self.send_response(200 if page is not None else 404)
        if page is not None:
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args: object) -> None:
        pass


def test_gzip_pages_are_read_as_their_text() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Gzip)
    server.daemon_threads = True
    with serving(server) as url:
        ident = identify(url, timeout=5.0)
    assert ident.model == "gz-model-53" and ident.kind == "sglang" and ident.max_running_requests == 7
