"""A scripted HTTP server on 127.0.0.1 for the cross-checks: a quiet JSON handler, and a
``with`` block that serves it from a thread and stops it after. Standard library only."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeVar

Server = TypeVar("Server", bound=ThreadingHTTPServer)


class JsonHandler(BaseHTTPRequestHandler):
    """Reads a JSON request body and answers JSON, logging nothing."""

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def read_json(self) -> Any:
        return json.loads(self.rfile.read(int(self.headers["Content-Length"])))

    def send_json(self, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@contextmanager
def serving(server: Server) -> Iterator[Server]:
    """``server`` answering from a daemon thread for the block, then shut down and closed."""
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
