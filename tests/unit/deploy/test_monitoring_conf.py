"""The monitoring that ships: Prometheus' and Grafana's configuration for docker-compose.yml, the Grafana
dashboard, and Spark's own metrics in the shipped ``spark-defaults.conf``.

* ``promtool`` (Debian's ``prometheus`` package) accepts the Prometheus configuration, and it scrapes both
  controllers on the port and address their command lines give livectl's endpoint;
* Grafana is provisioned with that Prometheus and the dashboard folder;
* every metric the dashboard's queries name is one the controller's collector exposes (checked against
  a real scrape of a collector), and it has the panels the status page has;
* Spark's PrometheusServlet sink and executor metrics are on in the shipped Spark properties."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from compose_file import COMPOSE, controller_parts, services
from observations import batch
from prometheus_client import generate_latest

from streaming.driver.session import spark_defaults
from streaming.monitoring import observatory as oy
from streaming.resources import GRAFANA_DASHBOARD, PROMETHEUS, conf_path

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[3]
CONF = REPO / "conf"


def test_prometheus_config_is_valid_and_scrapes_both_controllers() -> None:
    promtool = shutil.which("promtool")
    assert promtool, "Debian's prometheus package is needed (scripts/setup installs it)"
    conf = CONF / "prometheus" / "prometheus.yml"
    done = subprocess.run([promtool, "check", "config", str(conf)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    doc = yaml.safe_load(conf.read_text())
    jobs = {j["job_name"]: j for j in doc["scrape_configs"]}
    livectl_targets = {t for sc in jobs["livectl"]["static_configs"] for t in sc["targets"]}
    svcs = services()
    want = set()
    for name in ("controller", "controller-standby"):
        _, _, args = controller_parts(svcs[name])
        sets = dict(a.removeprefix("--set=").split("=", 1) for a in args if a.startswith("--set="))
        assert sets["metrics_bind_address"] == "0.0.0.0"  # reachable from the prometheus container
        want.add(f"{svcs[name]['hostname']}:{sets['metrics_port']}")
        # and published on the host's loopback only
        assert any(
            str(p).startswith("127.0.0.1:") and str(p).endswith(f":{sets['metrics_port']}") for p in svcs[name]["ports"]
        )
    assert livectl_targets == want
    assert jobs["spark-driver"]["metrics_path"] == "/metrics/prometheus/"
    assert jobs["spark-executors"]["metrics_path"] == "/metrics/executors/prometheus/"
    prom = svcs["prometheus"]
    assert "./conf/prometheus/prometheus.yml:/etc/prometheus/prometheus.yml:ro" in prom["volumes"]
    assert prom["ports"] == ["127.0.0.1:9090:9090"]


def test_grafana_is_provisioned_with_prometheus_and_the_dashboard() -> None:
    g = services()["grafana"]
    mounts = {v.split(":")[1]: v.split(":")[0] for v in g["volumes"]}
    assert mounts["/etc/grafana/provisioning"] == "./conf/grafana/provisioning"
    assert mounts["/var/lib/grafana/dashboards"] == "./conf/grafana/dashboards"
    assert g["depends_on"]["prometheus"]["condition"] == "service_healthy"
    assert all(str(p).startswith("127.0.0.1:") for p in g["ports"])
    ds = yaml.safe_load((CONF / "grafana/provisioning/datasources/livectl.yml").read_text())["datasources"][0]
    assert ds["url"] == "http://prometheus:9090" and ds["uid"] == "livectl-prometheus"
    prov = yaml.safe_load((CONF / "grafana/provisioning/dashboards/livectl.yml").read_text())["providers"][0]
    assert prov["options"]["path"] == "/var/lib/grafana/dashboards"
    assert COMPOSE.is_file()


def exposed_names() -> set[str]:
    o = oy.Observatory(1000)
    o.set_role(oy.Role.ACTIVE, 1)
    o.record_batch(batch())
    o.record_progress(7, 100.0)
    from streaming.monitoring.metrics_http import MetricsServer

    text = generate_latest(MetricsServer(o, 1).registry).decode()
    return {line.split("{")[0].split(" ")[0] for line in text.splitlines() if line and not line.startswith("#")}


def test_dashboard_queries_name_only_exposed_metrics_and_cover_the_status_page() -> None:
    dash = json.loads((CONF / "grafana/dashboards/livectl-controller.json").read_text())
    assert dash["uid"] == "livectl-controller"
    names = exposed_names()
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    assert exprs
    for expr in exprs:
        plain = re.sub(r'__name__=~"[^"]+"', "", expr)
        for name in re.findall(r"\b((?:kafka_controller|livectl)_\w+)\b", plain):
            assert name in names, f"{name} (in {expr!r}) is not exposed"
        for pattern in re.findall(r'__name__=~"([^"]+)"', expr):
            assert any(re.fullmatch(pattern, n) for n in names), pattern
    titles = {p["title"] for p in dash["panels"]}
    for wanted in (
        "Offline partitions",
        "Under-replicated",
        "Partitions by state",
        "Leaders per broker (and partitions it prefers)",
        "Preferred-leader imbalance per broker",
        "Reassignments in progress",
        "Last decisions",
    ):
        assert wanted in titles, wanted
    # the dashboard ships inside the package, where docker-compose.yml mounts it from
    assert conf_path(GRAFANA_DASHBOARD).is_file() and conf_path(PROMETHEUS).is_file()


def test_spark_metrics_the_spark_way_in_the_shipped_defaults() -> None:
    d = spark_defaults()
    assert d["spark.ui.prometheus.enabled"] == "true"
    assert d["spark.metrics.conf.*.sink.prometheusServlet.class"] == "org.apache.spark.metrics.sink.PrometheusServlet"
    assert d["spark.metrics.conf.*.sink.prometheusServlet.path"] == "/metrics/prometheus"
    assert d["spark.sql.streaming.metricsEnabled"] == "true"
