"""One way the test servers run: a threading HTTP server on 127.0.0.1 in a daemon thread,
stopped and joined when the block ends, so nothing outlives the test."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@contextmanager
def local_server(handler: type[BaseHTTPRequestHandler]) -> Iterator[int]:
    """Serve ``handler`` on 127.0.0.1 for the block; yields the port."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    httpd.block_on_close = False
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05})
    thread.daemon = True
    thread.start()
    try:
        yield httpd.server_address[1]
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)
