"""The live controller watched as operators watch it: a real Prometheus (Debian's ``prometheus``) scrapes the
active controller and a standby, and headless Chromium (Debian's ``chromium``) opens the status page, after
a broker failure. On that one degraded cluster (a cluster-default ``min.insync.replicas`` of 3) the four views
— the status page, the Prometheus endpoint, the CLI's ``topics --describe`` filters and the Spark UI's
figures — give the same figures (:mod:`core.figures`). The screenshot is kept as a test artifact:
``tests/artifacts/status-page.png`` (ignored by git) and the test's temporary folder."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from controller_harness import Cluster, start_controller
from observations import samples
from spark_status import job_descriptions, stage_figures
from waiting import poll_until, wait_until

from admin.cli import main as admin_main
from core import events as ev
from livectl.local import free_port
from streaming.driver.app import ControllerApp

pytestmark = pytest.mark.spark

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"


@pytest.fixture()
def prometheus(tmp_path: Path) -> Iterator[tuple[str, list[int]]]:
    """A Prometheus server on a free loopback port scraping two targets (ports chosen here) every 0.5 s."""
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.fail("Debian's prometheus package is missing: run scripts/setup")
    targets = [free_port(), free_port()]
    port = free_port()
    config = {
        "global": {"scrape_interval": "500ms", "scrape_timeout": "400ms", "evaluation_interval": "500ms"},
        "scrape_configs": [
            {
                "job_name": "livectl",
                "static_configs": [
                    {"targets": [f"127.0.0.1:{targets[0]}"], "labels": {"controller": "active"}},
                    {"targets": [f"127.0.0.1:{targets[1]}"], "labels": {"controller": "standby"}},
                ],
            }
        ],
    }
    conf = tmp_path / "prometheus.yml"
    conf.write_text(json.dumps(config))  # JSON is YAML
    log = (tmp_path / "prometheus.log").open("wb")
    proc = subprocess.Popen(
        [
            binary,
            f"--config.file={conf}",
            f"--web.listen-address=127.0.0.1:{port}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until("Prometheus ready", lambda: _get(f"{url}/-/ready") is not None, timeout=30)
        yield url, targets
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        log.close()


def _get(url: str) -> bytes | None:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return bytes(r.read())
    except OSError:
        return None


def query(prom: str, expr: str, timeout: float = 30.0) -> dict[str, float]:
    """Prometheus' HTTP query API: ``controller`` label -> value of each series of ``expr``.

    Every series queried here exists once the controller has started, so an empty answer is asked again
    (until ``timeout``): when one scrape misses its 0.4 s timeout on a loaded machine, Prometheus marks every
    series of that target stale and an instant query finds none of them until the next scrape succeeds."""

    def values() -> dict[str, float]:
        raw = _get(f"{prom}/api/v1/query?query={urllib.parse.quote(expr)}")
        if raw is None:
            return {}
        body = json.loads(raw)
        assert body["status"] == "success", body
        return {r["metric"].get("controller", ""): float(r["value"][1]) for r in body["data"]["result"]}

    return poll_until(values, timeout, interval=0.25)


def chromium(*args: str) -> str:
    binary = shutil.which("chromium")
    if binary is None:
        pytest.fail("Debian's chromium package is missing: run scripts/setup")
    done = subprocess.run(
        [binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", *args],
        capture_output=True,
        timeout=90,
        check=True,
    )
    return done.stdout.decode()


def cli_count(cluster: Cluster, capsys: pytest.CaptureFixture[str], option: str) -> int:
    """The partitions ``livectl topics --describe <option>`` lists."""
    capsys.readouterr()
    assert admin_main(["topics", "--describe", option, "--zookeeper", cluster.zk_connect]) == 0
    return len(capsys.readouterr().out.splitlines())


def card(page: str, label: str) -> int:
    """A figure of the status page's cards."""
    found = re.search(rf'id="card-{label}">[^<]*<b[^>]*>(\d+)</b>', page)
    assert found is not None, label
    return int(found.group(1))


def test_prometheus_and_status_page_after_a_broker_failure(
    spark: Any, cluster: Cluster, prometheus: tuple[str, list[int]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prom, (active_port, standby_port) = prometheus
    for b in (1, 2, 3):
        cluster.register_broker(b)
    # the cluster default every view reads (the controller at its start, the CLI from ZooKeeper): orders keeps an
    # ISR of two after the failure, below it
    cluster.zk.create("/config/brokers/<default>", b'{"version":1,"config":{"min.insync.replicas":"3"}}', makepath=True)
    settings = replace(cluster.settings, metrics_port=active_port)
    controller = start_controller(spark, settings)
    standby = ControllerApp(replace(settings, controller_id=1001, metrics_port=standby_port), spark=spark)
    standby_thread = threading.Thread(target=standby.run, name="livectl-standby", daemon=True)
    standby_thread.start()
    try:
        cluster.send_admin(ev.CreateTopic("c1", "orders", 3, 3, replica_assignment=((1, 2, 3), (2, 3, 1), (3, 1, 2))))
        cluster.send_admin(ev.CreateTopic("c2", "solo", 1, 1, replica_assignment=((3,),)))
        wait_until("topics online", lambda: cluster.state("orders", 2) and cluster.state("solo", 0), timeout=240)

        cluster.kill_broker(3)
        wait_until("solo-0 offline in ZooKeeper", lambda: (s := cluster.state("solo", 0)) and s["leader"] == -1)
        wait_until("orders-2 led by 1", lambda: (s := cluster.state("orders", 2)) and s["leader"] == 1)

        # Prometheus' view, through its query API
        def scraped(expr: str, want: dict[str, float]) -> bool:
            return query(prom, expr) == want

        wait_until(
            "active 1 / standby 0",
            lambda: scraped("kafka_controller_kafkacontroller_activecontrollercount", {"active": 1, "standby": 0}),
        )
        wait_until(
            "offline partitions 1",
            lambda: scraped(
                'kafka_controller_kafkacontroller_offlinepartitionscount{controller="active"}', {"active": 1}
            ),
        )
        wait_until(
            "global partition count 4",
            lambda: scraped(
                'kafka_controller_kafkacontroller_globalpartitioncount{controller="active"}', {"active": 4}
            ),
        )
        wait_until(
            "3 under-replicated",
            lambda: scraped('livectl_under_replicated_partitions{controller="active"}', {"active": 3}),
        )
        # orders-0/1/2 and solo-0 got their first leaders, then orders-2 moved from 3 to 1
        wait_until(
            "5 leader elections", lambda: scraped('livectl_leader_elections_total{controller="active"}', {"active": 5})
        )
        # Kafka's BrokerChange timer: the failure's micro-batch, once Spark reported its duration (the
        # progress event comes after the batch's writes, so it may trail them by a scrape or two)
        wait_until(
            "the broker-change timer",
            lambda: (
                query(
                    prom, 'kafka_controller_controllerstats_leaderelectionrateandtimems_count{controller="active"}'
                ).get("active", 0)
                >= 1
            ),
        )
        assert query(prom, 'livectl_input_records_total{controller="active",type="broker_failure"}') == {"active": 1}
        assert query(prom, 'livectl_input_records_total{controller="active",type="create_topic"}') == {"active": 2}
        assert query(prom, 'livectl_broker_leader_partitions{controller="active",broker="1"}') == {"active": 2}
        assert query(prom, 'livectl_controller_role{role="standby"}') == {"active": 0, "standby": 1}
        epoch = int(cluster.zk.get("/controller_epoch")[0])
        assert query(prom, 'livectl_controller_epoch{controller="active"}') == {"active": epoch}
        durations = query(prom, 'livectl_last_batch_duration_seconds{controller="active",part="micro_batch"}')
        assert 0 < durations["active"] < 300
        # the two create commands: one micro-batch, or two
        topic_changes = query(
            prom, 'kafka_controller_controllerstats_topicchangerateandtimems_count{controller="active"}'
        )
        assert topic_changes["active"] in (1, 2)

        # idle: no new input, the values stay as they were (the scrape is computed, not cached). The marker: a
        # scrape Prometheus took over a second (two scrape intervals) from now, by the sample's own timestamp
        idle_from = time.time()
        offline = 'kafka_controller_kafkacontroller_offlinepartitionscount{controller="active"}'
        wait_until(
            "a scrape a second after the controller went idle",
            lambda: query(prom, f"timestamp({offline})").get("active", 0) > idle_from + 1,
            timeout=30,
        )
        assert query(prom, 'kafka_controller_kafkacontroller_offlinepartitionscount{controller="active"}') == {
            "active": 1
        }

        # the status page in headless Chromium
        url = f"http://127.0.0.1:{active_port}/"
        dom = chromium("--dump-dom", url)
        assert '<span id="role">active</span>' in dom
        assert f"controller epoch {epoch}" in dom and "live brokers [1, 2]" in dom
        assert "Offline partitions (1)" in dom and "<td>solo</td>" in dom
        assert "Under-replicated partitions (3)" in dom and "<td>orders</td>" in dom
        assert 'id="leaders-chart"' in dom and "broker 3 (down)" in dom
        assert "LeaderAndIsr to broker 1" in dom and "/brokers/topics/solo/partitions/0/state" in dom
        standby_dom = chromium("--dump-dom", f"http://127.0.0.1:{standby_port}/")
        assert '<span id="role">standby</span>' in standby_dom

        # one truth per figure: the four views of this degraded cluster. orders-0/1/2 have an ISR of 2 of 3
        # (under-replicated, and under the cluster default min ISR of 3); solo-0 has no live leader (offline,
        # under min ISR), its last ISR [3] its whole replica set; orders-2 and solo-0 are not led by their
        # preferred replica 3
        want = {"offline": 1, "under_replicated": 3, "under_min_isr": 4, "imbalance": 2}
        page = (_get(url) or b"").decode()
        status = {
            "offline": card(page, "offline"),
            "under_replicated": card(page, "under-replicated"),
            "under_min_isr": card(page, "under-min-isr"),
            "imbalance": card(page, "preferred-imbalance"),
        }
        endpoint = samples((_get(f"{url}metrics") or b"").decode())
        metrics = {
            "offline": endpoint[("livectl_offline_partitions", ())],
            "under_replicated": endpoint[("livectl_under_replicated_partitions", ())],
            "under_min_isr": endpoint[("livectl_under_min_isr_partitions", ())],
            "imbalance": endpoint[("kafka_controller_kafkacontroller_preferredreplicaimbalancecount", ())],
        }
        assert endpoint[("kafka_controller_kafkacontroller_offlinepartitionscount", ())] == want["offline"]
        cli = {
            "offline": cli_count(cluster, capsys, "--unavailable-partitions"),
            "under_replicated": cli_count(cluster, capsys, "--under-replicated-partitions"),
            "under_min_isr": cli_count(cluster, capsys, "--under-min-isr-partitions"),
        }
        # the Spark UI: the newest figures stage's accumulators (Spark's listener bus may still be carrying the
        # last one) and the job line of the batch that made them
        sc = spark.sparkContext
        names = {
            "offline": "OfflinePartitionsCount",
            "under_replicated": "UnderReplicatedPartitions",
            "under_min_isr": "UnderMinIsrPartitionCount",
            "imbalance": "PreferredReplicaImbalanceCount",
        }

        def newest_stage() -> dict[str, int]:
            stages = [f for name, f in stage_figures(sc, limit=5) if name.startswith("livectl figures after batch")]
            return {k: stages[0].get(n, -1) for k, n in names.items()} if stages else {}

        figures_ui = poll_until(lambda: (f := newest_stage()) == want and f, 60) or newest_stage()
        head = f"livectl c{cluster.settings.controller_id} e{epoch} batch "
        line = next(d for d in job_descriptions(sc, limit=50) if d.startswith(head) and ": offline" in d)
        assert ": offline 1, URP 3, under min ISR 4, reassigning 0; imbalanced 2" in line, line
        assert status == metrics == figures_ui == want, (status, metrics, figures_ui)
        assert cli == {k: want[k] for k in cli}, cli

        shot = tmp_path / "status-page.png"
        chromium(f"--screenshot={shot}", "--window-size=1280,1500", "--hide-scrollbars", url)
        assert shot.stat().st_size > 10_000
        ARTIFACTS.mkdir(exist_ok=True)
        shutil.copy(shot, ARTIFACTS / "status-page.png")
    finally:
        standby.stop()
        standby_thread.join(60)
        controller.stop()
    assert not controller.error
