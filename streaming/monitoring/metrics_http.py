"""The driver's HTTP endpoint: ``/metrics`` (Prometheus' text format), ``/`` (the status page), ``/healthz``.

One small threaded HTTP server per controller process, started before the controller lease so that a
standby serves it too (``kafka_controller_kafkacontroller_activecontrollercount 0``). It binds to
``metrics_bind_address`` (loopback by default) on ``metrics_port``; port 0 turns it off. Every response is
computed from the :class:`streaming.monitoring.observatory.Observatory` at request time.
"""

from __future__ import annotations

import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from streaming.errors import StreamingError
from streaming.monitoring.observatory import Observatory
from streaming.monitoring.prometheus import registry_for
from streaming.monitoring.status_page import render

log = logging.getLogger("livectl.metrics_http")


class MetricsServerError(StreamingError):
    """The endpoint could not be started (the address is taken or not this machine's)."""


class MetricsServer:
    """``start()`` binds and serves from a daemon thread; ``stop()`` closes the socket."""

    def __init__(self, observatory: Observatory, port: int, bind_address: str = "127.0.0.1") -> None:
        self.observatory = observatory
        self.port = port
        self.bind_address = bind_address
        self.registry = registry_for(observatory)
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host = f"[{self.bind_address}]" if ":" in self.bind_address else self.bind_address
        return f"http://{host}:{self.port}"

    def start(self) -> None:
        from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

        observatory = self.observatory
        registry = self.registry

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    self._send(200, CONTENT_TYPE_LATEST, generate_latest(registry))
                elif path in ("/", "/index.html"):
                    self._send(200, "text/html; charset=utf-8", render(observatory.snapshot()).encode())
                elif path == "/healthz":
                    self._send(200, "text/plain; charset=utf-8", f"{observatory.role.value}\n".encode())
                else:
                    self._send(404, "text/plain; charset=utf-8", b"not found: try / or /metrics\n")

            def _send(self, code: int, content_type: str, body: bytes) -> None:
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                log.debug("%s " + format, self.address_string(), *args)

        family = ThreadingHTTPServer.address_family
        if ":" in self.bind_address:
            import socket

            family = socket.AF_INET6

        class Server(ThreadingHTTPServer):
            address_family = family
            daemon_threads = True

        try:
            self._server = Server((self.bind_address, self.port), Handler)
        except OSError as e:
            raise MetricsServerError(
                f"metrics endpoint {self.bind_address}:{self.port} (settings metrics_bind_address, metrics_port): "
                f"cannot listen: {e.strerror or e}"
            ) from None
        self._thread = threading.Thread(target=self._server.serve_forever, name="livectl-metrics-http", daemon=True)
        self._thread.start()
        log.info("metrics and status page: %s/metrics, %s/", self.url, self.url)

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None


def progress_listener(observatory: Observatory) -> Any:
    """A ``StreamingQueryListener`` that gives the observatory each micro-batch's duration (Spark's
    ``triggerExecution``), which the dispatcher, running inside the batch, cannot know."""
    from pyspark.sql.streaming.listener import StreamingQueryListener

    class ProgressListener(StreamingQueryListener):
        def onQueryStarted(self, event: Any) -> None:
            return None

        def onQueryProgress(self, event: Any) -> None:
            p = event.progress
            observatory.record_progress(int(p.batchId), float((p.durationMs or {}).get("triggerExecution", 0)))

        def onQueryIdle(self, event: Any) -> None:
            return None

        def onQueryTerminated(self, event: Any) -> None:
            return None

    return ProgressListener()


def start_endpoint(controller_id: int, port: int, bind_address: str) -> tuple[Observatory | None, MetricsServer | None]:
    """The observatory and its running server, or ``(None, None)`` when ``port`` is 0 (off)."""
    if port == 0:
        return None, None
    observatory = Observatory(controller_id)
    server = MetricsServer(observatory, port, bind_address)
    server.start()
    return observatory, server
