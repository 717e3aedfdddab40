"""The controller's HTTP endpoint on a real socket: its settings, the metrics page and health (standby first)."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request

import pytest
from observations import samples

from streaming.monitoring import observatory as oy
from streaming.monitoring.metrics_http import MetricsServer, MetricsServerError, start_endpoint
from streaming.settings import Settings, SettingsError

pytestmark = pytest.mark.unit


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_settings_of_the_endpoint() -> None:
    s = Settings()
    assert (s.metrics_port, s.metrics_bind_address) == (0, "127.0.0.1")
    assert Settings().with_overrides(["metrics_port=9404"]).metrics_port == 9404
    with pytest.raises(SettingsError, match="metrics_port"):
        Settings(metrics_port=70000)
    with pytest.raises(SettingsError, match="metrics_bind_address"):
        Settings(metrics_bind_address=" ")


def test_endpoint_serves_metrics_page_and_health_standby_first() -> None:
    assert start_endpoint(1, 0, "127.0.0.1") == (None, None)
    port = free_port()
    o, server = start_endpoint(1001, port, "127.0.0.1")
    assert o is not None and server is not None
    try:
        o.set_role(oy.Role.STANDBY)
        base = f"http://127.0.0.1:{port}"
        with urllib.request.urlopen(f"{base}/metrics", timeout=5) as r:
            assert r.headers["Content-Type"].startswith("text/plain")
            m = samples(r.read().decode())
        assert m[("kafka_controller_kafkacontroller_activecontrollercount", ())] == 0
        assert m[("livectl_controller_role", (("controller_id", "1001"), ("role", "standby")))] == 1
        with urllib.request.urlopen(f"{base}/", timeout=5) as r:
            assert "standby" in r.read().decode()
        with urllib.request.urlopen(f"{base}/healthz", timeout=5) as r:
            assert r.read() == b"standby\n"
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(f"{base}/nothing", timeout=5)
        assert e.value.code == 404
        # the port is taken: a clear error naming the settings
        with pytest.raises(MetricsServerError, match="metrics_port"):
            MetricsServer(o, port).start()
    finally:
        server.stop()
