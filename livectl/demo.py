"""``livectl demo``: the whole system on one machine, a scripted scenario, and a timeline of what the
controller decided.

What it starts (and stops again, by PID, at the end or on Ctrl-C):

1. ZooKeeper (Debian's package) and the tansu Kafka-protocol broker on free loopback ports, in the run
   folder (default ``run/demo``), through :mod:`livectl.local`;
2. ``--brokers N`` simulated brokers (ids 1..N), **one process each** (``python -m simbrokers``), so a hard
   kill is a real SIGKILL and a controlled shutdown a real SIGTERM; each writes ``brokers/broker-<id>.json``
   (its own view: role, leader, leader epoch, ISR of every partition it hosts);
3. the controller: :class:`streaming.app.ControllerApp` in a thread of this process, on a Spark session in
   local mode. Its address (``SparkContext.uiWebUrl``) is printed as soon as Spark is up. The JVM's output
   goes to ``spark.log``, the controller's log to ``controller.log``, each broker's to ``brokers/``.

The scenario, each step waiting for its effect (ZooKeeper *and* the brokers' own view) with a timeout:

==  ===========================  ===============================================================
1   create topics                ``orders`` (6 partitions, RF 3) and ``payments`` (3, RF 3) by Kafka's
                                 placement; ``audit`` with an explicit assignment on brokers 1 and 2
2   hard-kill broker 3           SIGKILL; its session expires; new leaders, ISRs without 3
3   restart broker 3             new broker epoch; back in every ISR it belongs to
4   reassign ``payments``        onto other brokers (KIP-455 walk), ``/admin/reassign_partitions`` gone
5   preferred-leader election    every partition led by its preferred replica again
6   controlled shutdown of N     SIGTERM; Kafka's ControlledShutdown answered with nothing remaining
7   delete ``audit``             ``/brokers/topics/audit`` and ``/admin/delete_topics/audit`` gone,
                                 no broker hosts it
==  ===========================  ===============================================================

While it runs it prints a timeline: ZooKeeper changes (``zk``), the requests the controller sent
(``req``, one line per micro-batch and API, read from ``livectl.requests``) and admin results (``admin``,
from ``livectl.admin-results``). Exit code: 0 every step succeeded, 1 a step or the set-up failed,
130 interrupted. ``--keep-running`` leaves the cluster up after the scenario until Ctrl-C.

:func:`run_demo` is the same thing as a function: tests inject already-running services (``zookeeper``,
``bootstrap``), a ``namespace`` (ZooKeeper chroot and topic-name prefix) and a SparkSession, and get a
:class:`DemoReport` back.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, TextIO

from livectl import local
from livectl import scenario as sc

log = logging.getLogger("livectl.demo")

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_RUN_DIR = Path("run") / "demo"
PROCESSES_FILE = "demo-processes.json"
EXIT_OK, EXIT_FAILED, EXIT_INTERRUPTED = 0, 1, 130

#: the topics of the scenario
ORDERS, PAYMENTS, AUDIT = "orders", "payments", "audit"


class DemoError(RuntimeError):
    """The demo could not set up or a step cannot go on; the message says what and where."""


class DemoInterruptedError(DemoError):
    """Ctrl-C / SIGTERM while a step was running."""


@dataclass(frozen=True)
class DemoOptions:
    """Everything ``livectl demo`` can be told. ``zookeeper``/``bootstrap`` given = use those services
    (not started or stopped here); ``namespace`` = ZooKeeper chroot ``/<namespace>`` and topic names
    ``<namespace>.admin`` etc., so that the demo can share services with other users (tests)."""

    brokers: int = 5
    run_dir: Path = DEFAULT_RUN_DIR
    keep_running: bool = False
    buckets: int = 4
    master: str = "local[2]"
    step_timeout_s: float = 90.0
    #: print the controller's decisions (ZooKeeper changes, requests, admin results), not only steps
    verbose: bool = True
    zookeeper: str | None = None
    bootstrap: str | None = None
    namespace: str | None = None
    #: the simulated brokers' ZooKeeper session timeout: a SIGKILLed broker is noticed after about this long
    broker_session_timeout_ms: int = 6000


@dataclass(frozen=True)
class StepResult:
    name: str
    ok: bool
    seconds: float
    detail: str


@dataclass
class DemoReport:
    steps: list[StepResult] = field(default_factory=list)
    #: ZooKeeper and the brokers' status documents as they were after the last step (before teardown)
    final_view: sc.ClusterView | None = None
    final_status: dict[int, dict[str, Any]] = field(default_factory=dict)
    spark_ui: str | None = None
    interrupted: bool = False
    error: str | None = None
    #: what teardown stopped ("broker 1 (pid 123)", …) and what was still running afterwards
    stopped: list[str] = field(default_factory=list)
    leftovers: list[str] = field(default_factory=list)
    total_seconds: float = 0.0
    #: what the scenario chose at run time: ``killed`` and ``shut_down`` broker ids, ``payments_before`` and
    #: ``payments_targets`` (partition -> replicas) of the reassignment
    facts: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.error is None and not self.interrupted and bool(self.steps) and all(s.ok for s in self.steps)

    @property
    def exit_code(self) -> int:
        if self.interrupted and not self.ok:
            return EXIT_INTERRUPTED
        return EXIT_OK if self.ok and not self.leftovers else EXIT_FAILED


# ================================================================================================ timeline


class Timeline:
    """Lines of the form ``[  12.3s] kind   text``, from several threads, never interleaved."""

    def __init__(self, out: TextIO, start: float | None = None) -> None:
        self.out = out
        self.start = time.monotonic() if start is None else start
        self._lock = threading.Lock()

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def line(self, kind: str, text: str) -> None:
        self._write(f"[{self.elapsed():6.1f}s] {kind:<5} {text}")

    def header(self, text: str) -> None:
        self._write("")
        self._write(f"== {text}")

    def plain(self, text: str) -> None:
        self._write(text)

    def _write(self, text: str) -> None:
        with self._lock:
            try:
                self.out.write(text + "\n")
                self.out.flush()
            except (OSError, ValueError):  # the terminal went away: keep stopping things regardless
                pass


# ================================================================================================ observer


class Observer(threading.Thread):
    """Reads what the controller decided and what the brokers believe, and keeps the latest of each.

    * ZooKeeper (Kafka's layout) every ``zk_interval_s`` → :class:`scenario.ClusterView`, changes printed;
    * ``livectl.requests`` and ``livectl.admin-results`` from their end at :meth:`open` time (assign +
      seek: consumer groups join slowly on tansu) → printed, requests kept for the checks;
    * the brokers' ``--status-file`` documents in ``status_dir``.
    """

    def __init__(
        self,
        *,
        zk_connect: str,
        bootstrap: str,
        requests_topic: str,
        results_topic: str,
        status_dir: Path,
        timeline: Timeline,
        verbose: bool,
        zk_interval_s: float = 0.4,
    ) -> None:
        super().__init__(name="livectl-demo-observer", daemon=True)
        self.zk_connect = zk_connect
        self.bootstrap = bootstrap
        self.requests_topic = requests_topic
        self.results_topic = results_topic
        self.status_dir = status_dir
        self.tl = timeline
        self.verbose = verbose
        self.zk_interval_s = zk_interval_s
        self.labels: dict[str, str] = {}
        self._lock = threading.Lock()
        self._stop_event = threading.Event()
        self._view = sc.ClusterView()
        self._status: dict[int, dict[str, Any]] = {}
        self._results: dict[str, dict[str, Any]] = {}
        self._requests: list[tuple[float, dict[str, Any]]] = []
        self._zk: Any = None
        self._consumer: Any = None
        self.failure: str | None = None

    # ------------------------------------------------------------------ lifecycle

    def open(self) -> None:
        """Connect and take the topics' end positions now (before anything is sent)."""
        from kafka import KafkaConsumer, TopicPartition
        from kazoo.client import KazooClient

        self._zk = KazooClient(hosts=self.zk_connect, timeout=10)
        self._zk.start(timeout=15)
        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap, enable_auto_commit=False, group_id=None)
        tps: list[Any] = []
        for topic in (self.requests_topic, self.results_topic):
            parts = consumer.partitions_for_topic(topic)
            if not parts:
                consumer.close()
                raise DemoError(f"topic {topic} does not exist on {self.bootstrap}")
            tps.extend(TopicPartition(topic, p) for p in sorted(parts))
        consumer.assign(tps)
        consumer.seek_to_end(*tps)
        for tp in tps:
            consumer.position(tp)
        self._consumer = consumer
        self._view = self._read_view()

    def stop(self) -> None:
        self._stop_event.set()
        if self.is_alive():
            self.join(10)
        if self._consumer is not None:
            with contextlib.suppress(Exception):
                self._consumer.close()
        if self._zk is not None:
            with contextlib.suppress(Exception):
                self._zk.stop()
                self._zk.close()

    def run(self) -> None:
        last_zk = 0.0
        while not self._stop_event.is_set():
            try:
                self._poll_kafka()
                if time.monotonic() - last_zk >= self.zk_interval_s:
                    last_zk = time.monotonic()
                    self._refresh_zk()
                    self._refresh_status()
            except Exception as e:  # keep observing; a step's check will notice if it matters
                self.failure = f"{type(e).__name__}: {e}"
                log.warning("observer: %s", self.failure)
                self._stop_event.wait(0.5)

    # ------------------------------------------------------------------ readers

    def _poll_kafka(self) -> None:
        batches = self._consumer.poll(timeout_ms=200)
        new_requests: list[dict[str, Any]] = []
        now = time.monotonic()
        for tp, records in sorted(batches.items(), key=lambda kv: (kv[0].topic, kv[0].partition)):
            for rec in records:
                try:
                    value = json.loads(rec.value)
                except (ValueError, TypeError):
                    continue
                if not isinstance(value, dict):
                    continue
                if tp.topic == self.results_topic:
                    rid = str(value.get("request_id"))
                    with self._lock:
                        self._results[rid] = value
                    label = self.labels.get(rid)
                    self.tl.line("admin", sc.describe_admin_result(value, label))
                else:
                    new_requests.append(value)
        if new_requests:
            with self._lock:
                self._requests.extend((now, m) for m in new_requests)
            if self.verbose:
                for text in sc.describe_requests(new_requests):
                    self.tl.line("req", text)

    def _refresh_zk(self) -> None:
        view = self._read_view()
        with self._lock:
            old, self._view = self._view, view
        if self.verbose:
            for text in sc.diff_views(old, view):
                self.tl.line("zk", text)

    def _read_view(self) -> sc.ClusterView:
        from admin.zkread import ZkReader

        reader = ZkReader(self._zk)
        brokers = {b: reg.epoch for b, reg in reader.brokers().items()}
        topics: dict[str, dict[int, sc.PartitionView]] = {}
        for t in reader.topics():
            try:
                tz = reader.topic(t)
            except (ValueError, KeyError, TypeError):  # written as we read it: next round
                continue
            if tz is None:
                continue
            adding, removing = dict(tz.adding_replicas), dict(tz.removing_replicas)
            parts: dict[int, sc.PartitionView] = {}
            for p, replicas in tz.partitions:
                try:
                    st = reader.partition_state(t, p)
                except (ValueError, KeyError, TypeError):
                    st = None
                parts[p] = sc.PartitionView(
                    tuple(replicas),
                    tuple(adding.get(p, ())),
                    tuple(removing.get(p, ())),
                    None if st is None else st.leader,
                    -1 if st is None else st.leader_epoch,
                    () if st is None else tuple(st.isr),
                )
            topics[t] = parts
        ctl = reader.controller()
        return sc.ClusterView(
            brokers,
            topics,
            tuple(sorted(reader.marked_for_deletion())),
            self._zk.exists("/admin/reassign_partitions") is not None,
            ctl.broker_id,
            ctl.epoch,
        )

    def _refresh_status(self) -> None:
        status: dict[int, dict[str, Any]] = {}
        for path in sorted(self.status_dir.glob("broker-*.json")):
            try:
                doc = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            for bid, st in (doc.get("brokers") or {}).items():
                status[int(bid)] = st
        with self._lock:
            self._status = status

    # ------------------------------------------------------------------ what the checks read

    def snapshot(self) -> tuple[sc.ClusterView, dict[int, dict[str, Any]]]:
        with self._lock:
            return self._view, dict(self._status)

    def result(self, request_id: str) -> dict[str, Any] | None:
        with self._lock:
            return self._results.get(request_id)

    def requests_since(self, since: float) -> list[dict[str, Any]]:
        with self._lock:
            return [m for t, m in self._requests if t >= since]


# ================================================================================================ processes


def _pid_alive(pid: int) -> bool:
    """Running and not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def descendants(pid: int) -> list[int]:
    """Every live process below ``pid`` (from ``/proc/*/stat``), depth first."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields_ = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields_[1]), []).append(int(entry.name))
    out: list[int] = []
    todo = list(children.get(pid, []))
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return [p for p in out if _pid_alive(p)]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


@dataclass
class BrokerProcess:
    """One ``python -m simbrokers --brokers <id>`` process. ``marker`` (its status file path) is checked
    in ``/proc/<pid>/cmdline`` before any signal, so a recycled PID is never signalled."""

    broker_id: int
    proc: subprocess.Popen[bytes]
    status_file: Path
    log_file: Path
    started: float = field(default_factory=time.monotonic)

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def marker(self) -> str:
        return str(self.status_file)

    def running(self) -> bool:
        return self.proc.poll() is None

    def signal(self, signum: int) -> None:
        if self.running() and local._pid_matches(self.pid, self.marker):
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signum)


def start_broker_process(
    broker_id: int,
    *,
    zookeeper: str,
    bootstrap: str,
    topics: dict[str, str],
    brokers_dir: Path,
    session_timeout_ms: int,
) -> BrokerProcess:
    """Start simulated broker ``broker_id`` in its own process and session (Ctrl-C in the terminal reaches
    only the demo, which then stops the brokers itself)."""
    brokers_dir.mkdir(parents=True, exist_ok=True)
    status = (brokers_dir / f"broker-{broker_id}.json").resolve()
    status.unlink(missing_ok=True)  # a previous incarnation's view must not be mistaken for this one's
    log_file = brokers_dir / f"broker-{broker_id}.log"
    cmd = [
        sys.executable,
        "-m",
        "simbrokers",
        "--brokers",
        str(broker_id),
        "--zookeeper",
        zookeeper,
        "--bootstrap-server",
        bootstrap,
        "--status-file",
        str(status),
        "--session-timeout-ms",
        str(session_timeout_ms),
        "--requests-topic",
        topics["requests"],
        "--events-topic",
        topics["events"],
        "--control-topic",
        topics["control"],
    ]
    env = dict(os.environ)
    # the packages of this checkout, whether or not livectl is installed in the interpreter
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    with log_file.open("ab") as out:
        out.write(f"\n--- {time.strftime('%H:%M:%S')} starting broker {broker_id}\n".encode())
        out.flush()
        proc = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True, env=env
        )
    return BrokerProcess(broker_id, proc, status, log_file)


@contextlib.contextmanager
def _output_to(path: Path) -> Iterator[None]:
    """Send this process's fd 1 and 2 to ``path`` meanwhile: the Spark JVM launched inside inherits them,
    so its log lines land in the file instead of the timeline. Python's own ``sys.stdout`` object is left
    alone (the timeline writes to a duplicate of the terminal taken before)."""
    try:
        fds = (sys.stdout.fileno(), sys.stderr.fileno())
    except (AttributeError, OSError, ValueError):  # not real files (captured): nothing to redirect
        yield
        return
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(fd) for fd in fds]
    target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        for fd in fds:
            os.dup2(target, fd)
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        for fd, old in zip(fds, saved, strict=True):
            os.dup2(old, fd)
            os.close(old)
        os.close(target)


# ================================================================================================ the demo


@dataclass
class _Controller:
    app: Any
    thread: threading.Thread
    errors: list[BaseException]

    def alive(self) -> bool:
        return self.thread.is_alive()


class Demo:
    """One run of the scenario. :meth:`run` never raises for a failed step: it reports, stops everything
    it started and returns the :class:`DemoReport`."""

    def __init__(
        self,
        options: DemoOptions,
        out: TextIO,
        *,
        spark: Any = None,
        stop: threading.Event | None = None,
        hard_stop: threading.Event | None = None,
        inspect: Callable[[DemoReport], None] | None = None,
    ) -> None:
        if options.brokers < 4:
            raise DemoError(
                f"--brokers must be at least 4 (the scenario kills one, moves a topic onto others "
                f"and shuts one down), got {options.brokers}"
            )
        self.o = options
        self.run_dir = options.run_dir.resolve()
        self.tl = Timeline(out)
        self.stop = stop or threading.Event()
        self.hard_stop = hard_stop or threading.Event()
        self.report = DemoReport()
        self.spark = spark
        self._owns_spark = spark is None
        self._owns_services = options.zookeeper is None
        self.services: local.LocalServices | None = None
        self.settings: Any = None
        self.zk_connect = ""
        self.bootstrap = ""
        self.topics: dict[str, str] = {}
        self.brokers: dict[int, BrokerProcess] = {}
        self.observer: Observer | None = None
        self.controller: _Controller | None = None
        self._jvm: subprocess.Popen[bytes] | None = None
        self.kill_id = 3
        self.shutdown_id = options.brokers
        self.inspect = inspect

    # ------------------------------------------------------------------ top level

    def run(self) -> DemoReport:
        t0 = time.monotonic()
        try:
            self._setup()
            self._scenario()
            if self.o.keep_running and self.report.ok:
                self._keep_running()
        except DemoInterruptedError:
            self.report.interrupted = True
            self.tl.line("demo", "interrupted: stopping everything (Ctrl-C again to kill at once)")
        except DemoError as e:
            self.report.error = str(e)
            self.tl.line("FAIL", str(e))
        except Exception as e:  # anything unexpected still ends in a clean teardown
            self.report.error = f"{type(e).__name__}: {e}"
            self.tl.line("FAIL", f"unexpected error: {self.report.error}")
            log.exception("demo failed")
        finally:
            self._capture_final()
            if self.inspect is not None and self.report.steps:
                try:
                    self.inspect(self.report)
                except Exception as e:  # a failed inspection must not keep the processes running
                    self.report.error = f"inspection before teardown failed: {type(e).__name__}: {e}"
            self._teardown()
            self.report.total_seconds = time.monotonic() - t0
            self._summary()
        return self.report

    # ------------------------------------------------------------------ set-up

    def _setup(self) -> None:
        from streaming.app import livectl_topics
        from streaming.settings import Settings

        o = self.o
        self.tl.plain(f"livectl demo: {o.brokers} simulated brokers, run folder {self.run_dir}")
        self.run_dir.mkdir(parents=True, exist_ok=True)
        if self._owns_services:
            self._clean_leftovers()
            started = time.monotonic()
            self.services = local.LocalServices(self.run_dir)
            self._record_processes()
            try:
                self.services.up()
            except local.LocalServiceError as e:
                raise DemoError(f"could not start the local services: {e}") from None
            zk, br = self.services.zookeeper, self.services.broker
            assert zk is not None and br is not None
            self.zk_connect, self.bootstrap = zk.connect, br.bootstrap
            self._record_processes()
            self.tl.line(
                "demo",
                f"ZooKeeper {zk.address} (pid {zk.pid}), Kafka/tansu {br.address} (pid {br.pid}) "
                f"up in {time.monotonic() - started:.1f} s",
            )
        else:
            assert o.bootstrap is not None and o.zookeeper is not None
            self.zk_connect, self.bootstrap = o.zookeeper, o.bootstrap
            # a checkpoint of an earlier run would make the query resume instead of starting cold
            for sub in ("checkpoint", "brokers"):
                shutil.rmtree(self.run_dir / sub, ignore_errors=True)
        self._check_stop()

        ns = o.namespace
        if ns:
            self._ensure_chroot(self.zk_connect, ns)
            self.zk_connect = f"{self.zk_connect}/{ns}"
        prefix = f"{ns}." if ns else "livectl."
        overrides = [
            f"zookeeper_connect={self.zk_connect}",
            f"bootstrap_servers={self.bootstrap}",
            f"num_buckets={o.buckets}",
            f"checkpoint_dir={self.run_dir / 'checkpoint'}",
            "trigger_interval=500 milliseconds",
        ]
        if ns:
            overrides += [
                f"admin_topic={prefix}admin",
                f"broker_events_topic={prefix}broker-events",
                f"requests_topic={prefix}requests",
                f"admin_results_topic={prefix}admin-results",
                f"rejected_topic={prefix}rejected",
                f"query_name={ns}",
            ]
        self.settings = Settings.load(overrides=overrides)
        s = self.settings
        self.topics = {
            "requests": s.requests_topic,
            "events": s.broker_events_topic,
            "control": f"{prefix}simbrokers.control" if ns else "livectl.simbrokers.control",
        }
        from sinks.requests import ensure_topics

        ensure_topics(self.bootstrap, [*livectl_topics(s), self.topics["control"]])

        self.observer = Observer(
            zk_connect=self.zk_connect,
            bootstrap=self.bootstrap,
            requests_topic=s.requests_topic,
            results_topic=s.admin_results_topic,
            status_dir=self.run_dir / "brokers",
            timeline=self.tl,
            verbose=o.verbose,
        )
        self.observer.open()
        self.observer.start()

        # brokers start (Python imports, kafka clients) while Spark starts: both take seconds
        started = time.monotonic()
        for bid in range(1, o.brokers + 1):
            self._start_broker(bid)
        self._start_spark()
        self._wait(
            "brokers registered",
            lambda: self._broker_start_problems(range(1, o.brokers + 1)),
            timeout=max(60.0, o.step_timeout_s),
        )
        pids = ", ".join(f"{b} (pid {p.pid})" for b, p in sorted(self.brokers.items()))
        self.tl.line("demo", f"brokers registered: {pids} ({time.monotonic() - started:.1f} s)")

        started = time.monotonic()
        self._start_controller()
        self._wait("the controller's first micro-batch", self._controller_ready_problems, timeout=180.0)
        view, _ = self._snapshot()
        self.tl.line(
            "demo",
            f"controller {s.controller_id} elected (controller epoch {view.controller_epoch}), first micro-batch "
            f"done {time.monotonic() - started:.1f} s after start",
        )

    def _clean_leftovers(self) -> None:
        """A demo that was SIGKILLed leaves its processes behind: stop them (by PID, after checking their
        command line) and start from empty data folders, so every run starts the same way."""
        path = self.run_dir / PROCESSES_FILE
        if path.exists():
            try:
                recorded = json.loads(path.read_text())
            except (OSError, ValueError):
                recorded = {}
            for name, entry in recorded.items():
                if local._pid_matches(int(entry["pid"]), str(entry["marker"])):
                    self.tl.line("demo", f"stopping {name} (pid {entry['pid']}) left by an earlier demo")
                    local.stop_process(int(entry["pid"]), str(entry["marker"]), timeout=5)
            path.unlink(missing_ok=True)
        stopped = local.LocalServices.load(self.run_dir).down()
        if stopped:
            self.tl.line("demo", f"stopped {', '.join(stopped)} left by an earlier demo")
        for sub in ("zookeeper", "broker", "checkpoint", "brokers"):
            shutil.rmtree(self.run_dir / sub, ignore_errors=True)

    def _record_processes(self) -> None:
        """``demo-processes.json``: every PID this demo started, for the next run's clean-up."""
        if not self._owns_services:
            return
        entries: dict[str, dict[str, Any]] = {}
        if self.services is not None:
            for name, svc in self.services.services.items():
                entries[name] = {"pid": svc.pid, "marker": svc.marker}
        for bid, bp in self.brokers.items():
            if bp.running():
                entries[f"broker {bid}"] = {"pid": bp.pid, "marker": bp.marker}
        tmp = self.run_dir / (PROCESSES_FILE + ".tmp")
        tmp.write_text(json.dumps(entries, indent=1))
        tmp.replace(self.run_dir / PROCESSES_FILE)

    @staticmethod
    def _ensure_chroot(connect: str, namespace: str) -> None:
        from kazoo.client import KazooClient

        zk = KazooClient(hosts=connect, timeout=10)
        zk.start(timeout=15)
        try:
            zk.ensure_path(f"/{namespace}")
        finally:
            zk.stop()
            zk.close()

    def _start_broker(self, broker_id: int) -> BrokerProcess:
        bp = start_broker_process(
            broker_id,
            zookeeper=self.zk_connect,
            bootstrap=self.bootstrap,
            topics=self.topics,
            brokers_dir=self.run_dir / "brokers",
            session_timeout_ms=self.o.broker_session_timeout_ms,
        )
        self.brokers[broker_id] = bp
        self._record_processes()
        return bp

    def _broker_start_problems(self, ids: Sequence[int] | range) -> list[str]:
        view, status = self._snapshot()
        problems = []
        for bid in ids:
            bp = self.brokers.get(bid)
            if bp is not None and not bp.running():
                tail = bp.log_file.read_text(errors="replace")[-1500:] if bp.log_file.exists() else ""
                raise DemoError(f"broker {bid} exited with code {bp.proc.returncode}; {bp.log_file}:\n{tail}")
            if bid not in view.brokers:
                problems.append(f"broker {bid} not registered")
            elif bid not in status:
                problems.append(f"broker {bid} has not written its status yet")
        return problems

    def _start_spark(self) -> None:
        if self.spark is not None:
            self.report.spark_ui = self.spark.sparkContext.uiWebUrl
            return
        from streaming.app import spark_session

        started = time.monotonic()
        # Python workers must run this interpreter (it has livectl's dependencies)
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        spark_log = self.run_dir / "spark.log"
        previous = signal.getsignal(signal.SIGINT)
        with _output_to(spark_log):
            self.spark = spark_session(self.settings, self.o.master)
        if threading.current_thread() is threading.main_thread() and previous is not None:
            # PySpark replaces the SIGINT handler when its context starts: Ctrl-C must stay ours
            signal.signal(signal.SIGINT, previous)
        self.spark.sparkContext.setLogLevel("WARN")
        gateway = getattr(self.spark.sparkContext, "_gateway", None)
        self._jvm = getattr(gateway, "proc", None)
        self.report.spark_ui = self.spark.sparkContext.uiWebUrl
        ui = self.report.spark_ui or "disabled"
        jvm = f"pid {self._jvm.pid}" if self._jvm is not None else "pid unknown"
        self.tl.line(
            "demo",
            f"Spark {self.spark.version} {self.o.master} up in {time.monotonic() - started:.1f} s "
            f"({jvm}, log {spark_log})",
        )
        self.tl.line("demo", f"Spark UI: {ui}")
        self._check_stop()

    def _start_controller(self) -> None:
        from streaming.app import ControllerApp

        app = ControllerApp(self.settings, spark=self.spark)
        errors: list[BaseException] = []

        def target() -> None:
            try:
                app.run()
            except BaseException as e:  # reported by every wait through _controller_problem
                errors.append(e)

        thread = threading.Thread(target=target, name="livectl-controller", daemon=True)
        thread.start()
        self.controller = _Controller(app, thread, errors)

    def _controller_ready_problems(self) -> list[str]:
        c = self.controller
        assert c is not None
        query = c.app.query
        if query is None:
            return ["waiting for the controller lease and the query to start"]
        if any((p.get("numInputRows") or 0) > 0 for p in query.recentProgress):
            return []
        return ["waiting for the first micro-batch with input (the failover snapshot)"]

    # ------------------------------------------------------------------ waiting

    def _snapshot(self) -> tuple[sc.ClusterView, dict[int, dict[str, Any]]]:
        assert self.observer is not None
        return self.observer.snapshot()

    def _check_stop(self) -> None:
        if self.stop.is_set():
            raise DemoInterruptedError("interrupted")

    def _controller_problem(self) -> str | None:
        c = self.controller
        if c is None:
            return None
        if c.errors:
            return f"the controller stopped: {type(c.errors[0]).__name__}: {c.errors[0]}"
        if not c.alive():
            return "the controller thread ended"
        return None

    def _wait(self, what: str, problems: Callable[[], list[str]], timeout: float) -> None:
        """Until ``problems()`` is empty; raises :class:`DemoError` on timeout (naming what was still
        wrong) or when the controller died, :class:`DemoInterruptedError` on Ctrl-C."""
        deadline = time.monotonic() + timeout
        last: list[str] = []
        while True:
            self._check_stop()
            dead = self._controller_problem()
            if dead is not None:
                raise DemoError(f"{what}: {dead}")
            last = problems()
            if not last:
                return
            if time.monotonic() >= deadline:
                more = f" (+{len(last) - 3} more)" if len(last) > 3 else ""
                raise DemoError(f"{what}: not done after {timeout:.0f} s; still: {'; '.join(last[:3])}{more}")
            self.stop.wait(0.25)

    # ------------------------------------------------------------------ scenario

    def _scenario(self) -> None:
        steps: list[tuple[str, Callable[[], str | None], Callable[[], list[str]], Callable[[], str]]] = [
            self._step_create(),
            self._step_hard_kill(),
            self._step_restart(),
            self._step_reassign(),
            self._step_preferred(),
            self._step_controlled_shutdown(),
            self._step_delete(),
        ]
        for i, (title, action, check, done) in enumerate(steps, start=1):
            self.tl.header(f"step {i}/{len(steps)}: {title}")
            started = time.monotonic()
            try:
                note = action()
                if note:
                    self.tl.line("demo", note)
                self._wait(title, check, self.o.step_timeout_s)
                detail = done()
                ok = True
            except DemoInterruptedError:
                self.report.steps.append(StepResult(title, False, time.monotonic() - started, "interrupted"))
                raise
            except DemoError as e:
                detail, ok = str(e), False
            seconds = time.monotonic() - started
            self.report.steps.append(StepResult(title, ok, seconds, detail))
            self.tl.line("ok" if ok else "FAIL", f"step {i} {'done' if ok else 'failed'} in {seconds:.1f} s: {detail}")
            if not ok:  # later steps build on this one
                return

    def _send(self, label: str, command: Any) -> str:
        from admin.publish import new_request_id, publish_command

        assert self.observer is not None
        rid = new_request_id()
        # commands are frozen dataclasses with request_id first
        from dataclasses import replace

        command = replace(command, request_id=rid)
        self.observer.labels[rid] = label
        publish_command(self.bootstrap, self.settings.admin_topic, command, rid)
        return rid

    def _result_problems(self, rids: dict[str, str]) -> list[str]:
        """Admin results still missing; an ``error`` result fails the step at once."""
        assert self.observer is not None
        problems = []
        for rid, label in rids.items():
            r = self.observer.result(rid)
            if r is None:
                problems.append(f"no result yet for {label}")
            elif r.get("status") == "in_progress":
                problems.append(f"{label} in progress")
            elif r.get("status") != "ok":
                raise DemoError(f"{label} failed: {r.get('error')}: {r.get('message')}")
        return problems

    def _step_create(self) -> tuple[str, Callable[[], str | None], Callable[[], list[str]], Callable[[], str]]:
        from core.events import CreateTopic

        wanted = {ORDERS: 6, PAYMENTS: 3, AUDIT: 2}
        rids: dict[str, str] = {}

        def action() -> str:
            for label, cmd in (
                (f"create_topic {ORDERS}", CreateTopic("", ORDERS, 6, 3)),
                (f"create_topic {PAYMENTS}", CreateTopic("", PAYMENTS, 3, 3)),
                (f"create_topic {AUDIT}", CreateTopic("", AUDIT, 2, 2, replica_assignment=((1, 2), (2, 1)))),
            ):
                rids[self._send(label, cmd)] = label
            return (
                f"sent: create {ORDERS} (6 partitions, RF 3) and {PAYMENTS} (3 partitions, RF 3) placed by the "
                f"controller, {AUDIT} on brokers 1,2 | 2,1"
            )

        def check() -> list[str]:
            problems = self._result_problems(rids)
            view, status = self._snapshot()
            for topic, count in wanted.items():
                parts = view.topics.get(topic)
                if parts is None:
                    problems.append(f"/brokers/topics/{topic} missing")
                    continue
                if len(parts) != count:
                    problems.append(f"{topic} has {len(parts)} partitions, want {count}")
                for p, pv in parts.items():
                    if pv.leader is None:
                        problems.append(f"{topic}-{p} has no state znode")
                    elif pv.leader != pv.replicas[0] or set(pv.isr) != set(pv.replicas):
                        problems.append(f"{topic}-{p} leader {pv.leader} isr {list(pv.isr)}")
            return problems + sc.brokers_disagree(view, status)

        def done() -> str:
            view, _ = self._snapshot()
            n = sum(len(view.topics[t]) for t in wanted)
            return f"{n} partitions online in ZooKeeper; every leader and follower confirmed by its broker"

        return "create topics", action, check, done

    def _step_hard_kill(self) -> tuple[str, Callable[[], str | None], Callable[[], list[str]], Callable[[], str]]:
        k = self.kill_id
        led: list[str] = []

        def action() -> str:
            view, _ = self._snapshot()
            led.extend(n for n, pv in view.partitions().items() if pv.leader == k)
            self.report.facts["killed"] = k
            bp = self.brokers[k]
            bp.signal(signal.SIGKILL)
            bp.proc.wait(10)
            bp.status_file.unlink(missing_ok=True)
            self._record_processes()
            return (
                f"SIGKILL broker {k} (pid {bp.pid}); it led {', '.join(led) or 'nothing'}; ZooKeeper ends its "
                f"session after ~{self.o.broker_session_timeout_ms / 1000:.0f} s"
            )

        def check() -> list[str]:
            view, status = self._snapshot()
            problems = [f"broker {k} still registered (session not expired yet)"] if k in view.brokers else []
            return problems + sc.leadership_problems(view, not_on=[k]) + sc.brokers_disagree(view, status)

        def done() -> str:
            view, _ = self._snapshot()
            parts = view.partitions()
            moved = ", ".join(f"{n} -> {parts[n].leader}" for n in led if n in parts)
            return f"broker {k} gone; new leaders {moved or '(none needed)'}; {k} removed from every ISR"

        return f"hard-kill broker {k}", action, check, done

    def _step_restart(self) -> tuple[str, Callable[[], str | None], Callable[[], list[str]], Callable[[], str]]:
        k = self.kill_id

        def action() -> str:
            bp = self._start_broker(k)
            return f"started broker {k} again (pid {bp.pid})"

        def check() -> list[str]:
            problems = self._broker_start_problems([k])
            view, status = self._snapshot()
            return problems + sc.missing_from_isr(view, k) + sc.brokers_disagree(view, status)

        def done() -> str:
            view, _ = self._snapshot()
            n = sum(1 for pv in view.partitions().values() if k in pv.replicas)
            return (
                f"broker {k} registered with broker epoch {view.brokers.get(k)}, caught up and back in the ISR "
                f"of {n} partitions"
            )

        return f"restart broker {k}", action, check, done

    def _step_reassign(self) -> tuple[str, Callable[[], str | None], Callable[[], list[str]], Callable[[], str]]:
        from core.events import ReassignPartitions
        from core.model import PartitionTarget

        targets: dict[int, tuple[int, ...]] = {}
        rids: dict[str, str] = {}

        def action() -> str:
            view, _ = self._snapshot()
            current = {p: pv.replicas for p, pv in view.topics[PAYMENTS].items()}
            targets.update(sc.reassignment_targets(current, sorted(view.brokers)))
            self.report.facts["payments_before"] = dict(current)
            self.report.facts["payments_targets"] = dict(targets)
            cmd = ReassignPartitions("", tuple(PartitionTarget(PAYMENTS, p, t) for p, t in sorted(targets.items())))
            rids[self._send(f"reassign {PAYMENTS}", cmd)] = f"reassign {PAYMENTS}"
            moves = ", ".join(f"{PAYMENTS}-{p} {list(current[p])} -> {list(t)}" for p, t in sorted(targets.items()))
            return f"sent: reassign {moves}"

        def check() -> list[str]:
            problems = self._result_problems(rids)
            view, status = self._snapshot()
            parts = view.topics.get(PAYMENTS, {})
            for p, t in targets.items():
                pv = parts.get(p)
                if pv is None:
                    problems.append(f"{PAYMENTS}-{p} missing")
                elif pv.replicas != t or pv.adding or pv.removing:
                    problems.append(
                        f"{PAYMENTS}-{p} replicas {list(pv.replicas)} "
                        f"(adding {list(pv.adding)}, removing {list(pv.removing)})"
                    )
                elif set(pv.isr) != set(t) or pv.leader not in t:
                    problems.append(f"{PAYMENTS}-{p} leader {pv.leader} isr {list(pv.isr)}")
            if view.reassign_pending:
                problems.append("/admin/reassign_partitions still exists")
            return problems + sc.brokers_disagree(view, status)

        def done() -> str:
            view, _ = self._snapshot()
            parts = view.topics[PAYMENTS]
            return (
                "; ".join(
                    f"{PAYMENTS}-{p} on {list(pv.replicas)} led by {pv.leader}" for p, pv in sorted(parts.items())
                )
                + "; old replicas stopped and deleted"
            )

        return f"reassign {PAYMENTS} onto other brokers", action, check, done

    def _step_preferred(self) -> tuple[str, Callable[[], str | None], Callable[[], list[str]], Callable[[], str]]:
        from core.events import ElectLeaders
        from core.model import ElectionType

        before: list[str] = []
        rids: dict[str, str] = {}

        def action() -> str:
            view, _ = self._snapshot()
            before.extend(sc.not_preferred(view))
            rids[self._send("elect-leaders PREFERRED (all partitions)", ElectLeaders("", ElectionType.PREFERRED))] = (
                "elect-leaders PREFERRED"
            )
            return "not led by their preferred replica: " + (", ".join(before) or "none")

        def check() -> list[str]:
            problems = self._result_problems(rids)
            view, status = self._snapshot()
            return problems + sc.not_preferred(view) + sc.brokers_disagree(view, status)

        def done() -> str:
            return f"{len(before)} partition(s) moved back to their preferred leader; every partition is led by it"

        return "preferred-leader election", action, check, done

    def _step_controlled_shutdown(
        self,
    ) -> tuple[str, Callable[[], str | None], Callable[[], list[str]], Callable[[], str]]:
        s_id = self.shutdown_id
        since = [0.0]
        led: list[str] = []

        def action() -> str:
            view, _ = self._snapshot()
            led.extend(n for n, pv in view.partitions().items() if pv.leader == s_id)
            since[0] = time.monotonic()
            self.report.facts["shut_down"] = s_id
            bp = self.brokers[s_id]
            bp.signal(signal.SIGTERM)
            leads = ", ".join(led) or "nothing"
            return f"SIGTERM broker {s_id} (pid {bp.pid}): Kafka's controlled shutdown; it leads {leads}"

        def answers() -> list[dict[str, Any]]:
            assert self.observer is not None
            return [
                m
                for m in self.observer.requests_since(since[0])
                if m.get("api") == "ControlledShutdownResponse" and int(m.get("brokerId", -1)) == s_id
            ]

        def check() -> list[str]:
            bp = self.brokers[s_id]
            problems = []
            if bp.running():
                problems.append(f"broker {s_id} still shutting down")
            elif bp.proc.returncode != 0:
                raise DemoError(f"broker {s_id} exited with code {bp.proc.returncode}; see {bp.log_file}")
            else:
                bp.status_file.unlink(missing_ok=True)
            view, status = self._snapshot()
            if s_id in view.brokers:
                problems.append(f"broker {s_id} still registered")
            clean = [m for m in answers() if not (m["body"].get("remainingPartitions") or m["body"].get("errorCode"))]
            if not clean:
                problems.append(f"no ControlledShutdownResponse with nothing remaining sent to broker {s_id}")
            return problems + sc.leadership_problems(view, not_on=[s_id]) + sc.brokers_disagree(view, status)

        def done() -> str:
            self._record_processes()
            view, _ = self._snapshot()
            parts = view.partitions()
            moved = ", ".join(f"{n} -> {parts[n].leader}" for n in led if n in parts)
            return (
                f"broker {s_id} shut down cleanly after {len(answers())} ControlledShutdown answer(s); "
                f"leadership moved first: {moved or '(it led nothing)'}"
            )

        return f"controlled shutdown of broker {s_id}", action, check, done

    def _step_delete(self) -> tuple[str, Callable[[], str | None], Callable[[], list[str]], Callable[[], str]]:
        from core.events import DeleteTopic

        rids: dict[str, str] = {}

        def action() -> str:
            rids[self._send(f"delete_topic {AUDIT}", DeleteTopic("", AUDIT))] = f"delete_topic {AUDIT}"
            return f"sent: delete {AUDIT}"

        def check() -> list[str]:
            problems = self._result_problems(rids)
            view, status = self._snapshot()
            if AUDIT in view.topics:
                problems.append(f"/brokers/topics/{AUDIT} still exists")
            if view.delete_topics:
                problems.append(f"/admin/delete_topics still lists {', '.join(view.delete_topics)}")
            for b, st in sorted(status.items()):
                hosted = [n for n in (st.get("partitions") or {}) if n.rsplit("-", 1)[0] == AUDIT]
                if hosted:
                    problems.append(f"broker {b} still hosts {', '.join(hosted)}")
            return problems + sc.brokers_disagree(view, status, skip_topics=[AUDIT])

        def done() -> str:
            return f"{AUDIT} gone from ZooKeeper (/admin/delete_topics empty) and from every broker"

        return f"delete topic {AUDIT}", action, check, done

    def _keep_running(self) -> None:
        self.tl.header("cluster running: Ctrl-C to stop")
        zk = self.zk_connect
        self.tl.plain(f"  livectl topics --describe --zookeeper {zk}")
        self.tl.plain(f"  livectl brokers list --zookeeper {zk}")
        self.tl.plain(
            f"  livectl elect-leaders --election-type PREFERRED --all-topic-partitions "
            f"--bootstrap-server {self.bootstrap} --zookeeper {zk} --wait"
        )
        self.tl.plain(f"  Spark UI: {self.report.spark_ui or 'disabled'}")
        while not self.stop.is_set():
            dead = self._controller_problem()
            if dead is not None:
                raise DemoError(dead)
            self.stop.wait(0.5)
        # stopping a cluster that was left running on purpose is the normal end: exit code 0
        self.tl.line("demo", "Ctrl-C: stopping everything (Ctrl-C again to kill at once)")

    # ------------------------------------------------------------------ teardown

    def _capture_final(self) -> None:
        if self.observer is None:
            return
        with contextlib.suppress(Exception):
            self.observer._refresh_status()
            self.observer._refresh_zk()
        self.report.final_view, self.report.final_status = self._snapshot()

    def _teardown(self) -> None:
        """Brokers (asked to exit at once; SIGKILL after 10 s or on a second Ctrl-C), the controller, Spark
        (its JVM ends when its stdin closes), then ZooKeeper and tansu. Every PID is checked afterwards."""
        self.tl.header("stopping everything this demo started")
        ours: dict[int, str] = {}
        for bid, bp in sorted(self.brokers.items()):
            if bp.running():
                ours[bp.pid] = f"broker {bid}"
        if self._owns_spark and self._jvm is not None:
            ours[self._jvm.pid] = "Spark JVM"
            for pid in descendants(self._jvm.pid):
                ours[pid] = f"Spark worker ({_cmdline(pid)[:60]})"
        if self.services is not None:
            for name, svc in self.services.services.items():
                ours[svc.pid] = "ZooKeeper" if name == "zookeeper" else "tansu (Kafka)"

        if self.observer is not None:
            # what the controller does while everything shuts down is not part of the scenario
            self.observer.stop()
        started = time.monotonic()
        running = [bp for bp in self.brokers.values() if bp.running()]
        # SIGINT twice = the simulated brokers' "exit now": sessions closed, clients flushed, no controlled
        # shutdown (the scenario showed one; with every broker leaving at once it would only retry for ~20 s)
        for bp in running:
            bp.signal(signal.SIGINT)
        time.sleep(0.3)
        for bp in running:
            bp.signal(signal.SIGINT)
        deadline = time.monotonic() + 10.0
        while any(bp.running() for bp in running) and time.monotonic() < deadline and not self.hard_stop.is_set():
            time.sleep(0.1)
        for bp in running:
            if bp.running():
                bp.signal(signal.SIGKILL)
                self.report.stopped.append(f"broker {bp.broker_id} (pid {bp.pid}, SIGKILL)")
            else:
                self.report.stopped.append(f"broker {bp.broker_id} (pid {bp.pid})")
            with contextlib.suppress(subprocess.TimeoutExpired):
                bp.proc.wait(10)
        if running:
            self.tl.line("demo", f"brokers stopped in {time.monotonic() - started:.1f} s")

        if self.controller is not None:
            self.controller.app.stop()
            self.controller.thread.join(60)
            if self.controller.thread.is_alive():
                self.tl.line("FAIL", "the controller did not stop within 60 s")
            else:
                self.report.stopped.append("controller query")
        if self._owns_spark and self.spark is not None:
            self._stop_spark()
        if self.services is not None:
            for name in self.services.down():
                self.report.stopped.append(name)
            self._record_processes()

        self.report.leftovers = [
            f"{what} (pid {pid}: {_cmdline(pid)[:80]})" for pid, what in ours.items() if _pid_alive(pid)
        ]
        if self._owns_services:
            with contextlib.suppress(OSError):
                (self.run_dir / PROCESSES_FILE).unlink(missing_ok=True)
        if self.report.leftovers:
            self.tl.line("FAIL", "still running: " + "; ".join(self.report.leftovers))
        else:
            self.tl.line("demo", f"stopped {len(ours)} processes ({_kinds(ours.values())}); none left running")

    def _stop_spark(self) -> None:
        from pyspark import SparkContext

        with contextlib.suppress(Exception):
            self.spark.stop()
        jvm = self._jvm
        # the JVM of a PySpark driver exits when its stdin closes (PythonGatewayServer)
        with contextlib.suppress(Exception):
            gateway = SparkContext._gateway
            if gateway is not None:
                gateway.shutdown()
        SparkContext._gateway = None
        SparkContext._jvm = None
        if jvm is not None:
            with contextlib.suppress(OSError):
                if jvm.stdin is not None:
                    jvm.stdin.close()
            try:
                jvm.wait(20)
            except subprocess.TimeoutExpired:
                jvm.terminate()
                try:
                    jvm.wait(10)
                except subprocess.TimeoutExpired:
                    jvm.kill()
                    jvm.wait(5)
            self.report.stopped.append(f"Spark JVM (pid {jvm.pid})")

    # ------------------------------------------------------------------ summary

    def _summary(self) -> None:
        r = self.report
        self.tl.header("summary")
        for i, st in enumerate(r.steps, start=1):
            self.tl.plain(f"  {i}. {st.name:<40} {'ok' if st.ok else 'FAILED':<7} {st.seconds:6.1f} s")
        if r.final_view is not None and r.final_view.topics:
            self.tl.plain("")
            self.tl.plain("  final state in ZooKeeper:")
            for row in sc.format_table(r.final_view):
                self.tl.plain("    " + row)
        outcome = "all steps succeeded" if r.ok else ("interrupted" if r.interrupted else "FAILED")
        if r.error:
            outcome += f": {r.error}"
        self.tl.plain("")
        self.tl.plain(f"  {outcome}; {r.total_seconds:.0f} s in all; logs in {self.run_dir}")


def _kinds(names: Iterable[str]) -> str:
    """``5 brokers, Spark JVM, 9 Spark workers, zookeeper, broker`` from process descriptions."""
    counts: dict[str, int] = {}
    for n in names:
        kind = "broker" if n.startswith("broker ") else "Spark worker" if n.startswith("Spark worker") else n
        counts[kind] = counts.get(kind, 0) + 1
    return ", ".join(f"{c} {k}s" if c > 1 else k for k, c in counts.items())


def run_demo(
    options: DemoOptions,
    out: TextIO | None = None,
    *,
    spark: Any = None,
    stop: threading.Event | None = None,
    hard_stop: threading.Event | None = None,
    inspect: Callable[[DemoReport], None] | None = None,
) -> DemoReport:
    """Run the scenario (see the module docstring) and stop what was started; never raises for a failed
    step. ``spark`` given = use that session and leave it running; ``stop`` set = behave as on Ctrl-C;
    ``inspect`` is called after the scenario and before anything is stopped (tests read the live system
    there; an exception in it is reported in :attr:`DemoReport.error`)."""
    return Demo(options, out or sys.stdout, spark=spark, stop=stop, hard_stop=hard_stop, inspect=inspect).run()


# ================================================================================================ CLI


def _cmd_demo(args: argparse.Namespace) -> int:
    options = DemoOptions(
        brokers=args.brokers,
        run_dir=args.run_dir,
        keep_running=args.keep_running,
        buckets=args.buckets,
        master=args.master,
        step_timeout_s=args.step_timeout,
        verbose=not args.quiet,
    )
    if options.brokers < 4:
        print(f"livectl demo: --brokers must be at least 4, got {options.brokers}", file=sys.stderr)
        return 2
    run_dir = options.run_dir.resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    # the controller's and the clients' logs go to a file: the terminal shows the timeline
    handler = logging.FileHandler(run_dir / "controller.log")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=logging.INFO, handlers=[handler], force=True)
    # PySpark reports a query stopped in the middle of a batch with warnings: into the log, not the timeline
    logging.captureWarnings(True)
    for noisy in ("kafka", "kazoo", "py4j"):
        logging.getLogger(noisy).setLevel(logging.WARNING)

    # the timeline writes to its own copy of the terminal, untouched while Spark's output is redirected
    out: TextIO = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1, encoding="utf-8", errors="replace")
    stop, hard_stop = threading.Event(), threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        del frame
        if stop.is_set():
            hard_stop.set()
        stop.set()

    demo = Demo(options, out, stop=stop, hard_stop=hard_stop)
    original = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    for s in original:
        signal.signal(s, on_signal)
    try:
        report = demo.run()
    finally:
        for s, h in original.items():
            signal.signal(s, h)
        out.flush()
    return report.exit_code


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``livectl demo`` to the top-level parser."""
    p = subparsers.add_parser(
        "demo",
        help="run the whole system locally and a scripted scenario, with a timeline of the controller's decisions",
        description=(
            "Start ZooKeeper, a Kafka-protocol broker, N simulated brokers and the controller (Spark local), run "
            "a scenario (create topics, hard-kill and restart a broker, reassign, preferred election, controlled "
            "shutdown, delete), print what the controller decided, then stop everything it started."
        ),
    )
    p.add_argument("--brokers", type=int, default=5, help="simulated brokers, ids 1..N (at least 4; default 5)")
    p.add_argument("--run-dir", type=Path, default=DEFAULT_RUN_DIR, help="run folder (default: %(default)s)")
    p.add_argument("--keep-running", action="store_true", help="leave the cluster up after the scenario until Ctrl-C")
    p.add_argument("--buckets", type=int, default=4, help="controller state buckets = shuffle partitions (default 4)")
    p.add_argument("--master", default="local[2]", help="Spark master (default: %(default)s)")
    p.add_argument("--step-timeout", type=float, default=90.0, help="seconds each step may take (default 90)")
    p.add_argument("--quiet", action="store_true", help="print only the steps, not every decision")
    p.set_defaults(func=_cmd_demo)
