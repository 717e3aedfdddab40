"""One run of ``livectl demo`` (:class:`Demo`, :func:`run_demo`): set-up, the scenario's steps
(:mod:`livectl.demo.steps`), waiting with timeouts, teardown of everything started, the summary."""

from __future__ import annotations

import contextlib
import json
import logging
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, TextIO

from livectl import local
from livectl import scenario as sc
from livectl.demo.observer import Observer
from livectl.demo.processes import BrokerHandle, cmdline, descendants, kinds, pid_alive, start_broker_process
from livectl.demo.report import DemoError, DemoInterruptedError, DemoOptions, DemoReport, StepResult
from livectl.demo.spark import start_spark, stop_spark
from livectl.demo.steps import SCENARIO
from livectl.demo.timeline import Timeline
from livectl.local import pid_matches

log = logging.getLogger("livectl.demo")

PROCESSES_FILE = "demo-processes.json"


@dataclass
class _Controller:
    app: Any
    thread: threading.Thread
    errors: list[BaseException]

    def alive(self) -> bool:
        return self.thread.is_alive()


class Demo:
    """One run of the scenario on simulated brokers. :meth:`run` never raises for a failed step: it reports,
    stops everything it started and returns the :class:`DemoReport`. :class:`livectl.demo.kafka.KafkaDemo`
    runs it on real Kafka brokers through the hooks below (``_start_cluster``, ``_status_reader``,
    ``_after_step``, ``_after_scenario``, ``_stop_brokers``, ``_owned``)."""

    #: how the timeline names the brokers
    broker_kind = "simulated"
    #: the run folder's sub-folders a run starts without (its own services' data, the query's checkpoint,
    #: the brokers' files)
    RUN_SUBDIRS: tuple[str, ...] = ("checkpoint", "brokers")

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
        if not options.kafka and options.brokers < 4:
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
        self.brokers: dict[int, BrokerHandle] = {}
        self.observer: Observer | None = None
        self.controller: _Controller | None = None
        #: the pid of the Spark JVM this demo started
        self._spark_jvm: int | None = None
        self.plan = sc.demo_plan(options.brokers)
        self.inspect = inspect

    # ------------------------------------------------------------------ top level

    def run(self) -> DemoReport:
        t0 = time.monotonic()
        try:
            self._setup()
            self._scenario()
            self._after_scenario()
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
        from streaming.driver.startup import livectl_topics
        from streaming.settings import Settings

        o = self.o
        self.tl.plain(f"livectl demo: {o.brokers} {self.broker_kind} brokers, run folder {self.run_dir}")
        self.run_dir.mkdir(parents=True, exist_ok=True)
        if self._owns_services:
            self._clean_leftovers()
            started = time.monotonic()
            self.services = local.LocalServices(self.run_dir)
            self.record_processes()
            try:
                self.services.up()
            except local.LocalServiceError as e:
                raise DemoError(f"could not start the local services: {e}") from None
            zk, br = self.services.zookeeper, self.services.broker
            assert zk is not None and br is not None
            self.zk_connect, self.bootstrap = zk.connect, br.bootstrap
            self.record_processes()
            self.tl.line(
                "demo",
                f"ZooKeeper {zk.address} (pid {zk.pid}), Kafka {br.address} (pid {br.pid}) "
                f"up in {time.monotonic() - started:.1f} s",
            )
        else:
            assert o.bootstrap is not None and o.zookeeper is not None
            self.zk_connect, self.bootstrap = o.zookeeper, o.bootstrap
            # a checkpoint of an earlier run would make the query resume instead of starting cold
            for sub in self.RUN_SUBDIRS:
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
            status_reader=self._status_reader(),
        )
        self.observer.open()
        self.observer.start()
        self._start_cluster()

    def _status_reader(self) -> Callable[[], dict[int, dict[str, Any]]] | None:
        """The brokers' own view for the observer (``None``: the simulated brokers' status files)."""
        return None

    def _start_cluster(self) -> None:
        """The brokers, Spark and the controller."""
        o, s = self.o, self.settings
        # brokers start (Python imports, kafka clients) while Spark starts: both take seconds
        started = time.monotonic()
        for bid in range(1, o.brokers + 1):
            self.start_broker(bid)
        self._start_spark()
        self._wait(
            "brokers registered",
            lambda: self.broker_start_problems(range(1, o.brokers + 1)),
            timeout=max(60.0, o.step_timeout_s),
        )
        pids = ", ".join(f"{b} (pid {p.pid})" for b, p in sorted(self.brokers.items()))
        self.tl.line("demo", f"brokers registered: {pids} ({time.monotonic() - started:.1f} s)")

        epoch, took = self._start_controller_until_ready()
        self.tl.line(
            "demo",
            f"controller {s.controller_id} elected (controller epoch {epoch}), first micro-batch "
            f"done {took:.1f} s after start",
        )

    def _start_controller_until_ready(self) -> tuple[int | None, float]:
        """Start the controller and wait for its first micro-batch: its controller epoch and the seconds taken."""
        started = time.monotonic()
        self._start_controller()
        self._wait("the controller's first micro-batch", self._controller_ready_problems, timeout=180.0)
        view, _ = self.snapshot()
        return view.controller_epoch, time.monotonic() - started

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
                if pid_matches(int(entry["pid"]), str(entry["marker"])):
                    self.tl.line("demo", f"stopping {name} (pid {entry['pid']}) left by an earlier demo")
                    local.stop_process(int(entry["pid"]), str(entry["marker"]), timeout=5)
            path.unlink(missing_ok=True)
        stopped = local.LocalServices.load(self.run_dir).down()
        if stopped:
            self.tl.line("demo", f"stopped {', '.join(stopped)} left by an earlier demo")
        for sub in ("zookeeper", "broker", *self.RUN_SUBDIRS):
            shutil.rmtree(self.run_dir / sub, ignore_errors=True)

    def record_processes(self) -> None:
        """``demo-processes.json``: every PID this demo started, for the next run's clean-up."""
        if not self._owns_services:
            return
        entries: dict[str, dict[str, Any]] = {}
        if self.services is not None:
            for name, svc in self.services.services.items():
                entries[name] = {"pid": svc.pid, "marker": svc.marker}
        for pid, (name, marker) in self._owned().items():
            entries[name] = {"pid": pid, "marker": marker}
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

    def _owned(self) -> dict[int, tuple[str, str]]:
        """The broker processes (and helpers) this demo started that run now: pid -> (name, marker)."""
        return {bp.pid: (f"broker {bid}", bp.marker) for bid, bp in sorted(self.brokers.items()) if bp.running()}

    def start_broker(self, broker_id: int) -> BrokerHandle:
        bp = start_broker_process(
            broker_id,
            zookeeper=self.zk_connect,
            bootstrap=self.bootstrap,
            topics=self.topics,
            brokers_dir=self.run_dir / "brokers",
            session_timeout_ms=self.o.broker_session_timeout_ms,
        )
        self.brokers[broker_id] = bp
        self.record_processes()
        return bp

    def broker_start_problems(self, ids: Sequence[int] | range) -> list[str]:
        view, status = self.snapshot()
        problems = []
        for bid in ids:
            bp = self.brokers.get(bid)
            if bp is not None and not bp.running():
                tail = bp.log_file.read_text(errors="replace")[-1500:] if bp.log_file.exists() else ""
                raise DemoError(f"{bp.exit_problem() or f'broker {bid} exited'}; {bp.log_file}:\n{tail}")
            if bid not in view.brokers:
                problems.append(f"broker {bid} not registered")
            elif bid not in status:
                problems.append(f"broker {bid}'s own view not read yet")
        return problems

    def _start_spark(self) -> None:
        if self.spark is not None:
            self.report.spark_ui = self.spark.sparkContext.uiWebUrl
            return
        started = time.monotonic()
        spark_log = self.run_dir / "spark.log"
        self.spark, self._spark_jvm = start_spark(self.settings, self.o.master, spark_log)
        self.report.spark_ui = self.spark.sparkContext.uiWebUrl
        ui = self.report.spark_ui or "disabled"
        jvm = f"pid {self._spark_jvm}" if self._spark_jvm is not None else "pid unknown"
        self.tl.line(
            "demo",
            f"Spark {self.spark.version} {self.o.master} up in {time.monotonic() - started:.1f} s "
            f"({jvm}, log {spark_log})",
        )
        self.tl.line("demo", f"Spark UI: {ui}")
        self._check_stop()

    def _start_controller(self) -> None:
        from streaming.driver.app import ControllerApp

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

    def snapshot(self) -> tuple[sc.ClusterView, dict[int, dict[str, Any]]]:
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
        steps = [make(self) for make in SCENARIO]
        for i, step in enumerate(steps, start=1):
            title = step.title
            self.tl.header(f"step {i}/{len(steps)}: {title}")
            started = time.monotonic()
            try:
                note = step.action()
                if note:
                    self.tl.line("demo", note)
                self._wait(title, step.check, self.o.step_timeout_s)
                detail = step.done()
                self._after_step(i, title)
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

    def _after_step(self, index: int, title: str) -> None:
        """Called when step ``index`` (1-based) has its effect; a :class:`DemoError` fails the step."""

    def _after_scenario(self) -> None:
        """Called after the last step (or the first failed one), before ``--keep-running`` and teardown."""

    def send(self, label: str, command: Any) -> str:
        from admin.publish import new_request_id, publish_command

        assert self.observer is not None
        rid = new_request_id()
        # commands are frozen dataclasses with request_id first
        command = replace(command, request_id=rid)
        self.observer.labels[rid] = label
        publish_command(self.bootstrap, self.settings.admin_topic, command, rid)
        return rid

    def requests_since(self, since: float) -> list[dict[str, Any]]:
        assert self.observer is not None
        return self.observer.requests_since(since)

    def result_problems(self, rids: dict[str, str]) -> list[str]:
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

    def _keep_running(self) -> None:
        self.tl.header("cluster running: Ctrl-C to stop")
        zk = self.zk_connect
        self.tl.plain(f"  livectl topics --describe --zookeeper {zk}")
        self.tl.plain(f"  livectl brokers list --zookeeper {zk}")
        self.tl.plain(
            f"  livectl elect-leaders --election-type PREFERRED --all-topic-partitions "
            f"--bootstrap-server {self.bootstrap} --zookeeper {zk}"
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
            self.observer.refresh()
        self.report.final_view, self.report.final_status = self.snapshot()

    def _stop_brokers(self) -> None:
        """Stop every broker still running (SIGKILL after 10 s or on a second Ctrl-C), noting each in the
        report."""
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
            bp.wait(10)
        if running:
            self.tl.line("demo", f"brokers stopped in {time.monotonic() - started:.1f} s")

    def _teardown(self) -> None:
        """Brokers (asked to exit at once; SIGKILL after 10 s or on a second Ctrl-C), the controller, Spark
        (its JVM ends when its stdin closes), then ZooKeeper and Kafka. Every PID is checked afterwards."""
        self.tl.header("stopping everything this demo started")
        ours = {pid: name for pid, (name, _) in self._owned().items()}
        if self._owns_spark and self._spark_jvm is not None:
            ours[self._spark_jvm] = "Spark JVM"
            for pid in descendants(self._spark_jvm):
                ours[pid] = f"Spark worker ({cmdline(pid)[:60]})"
        if self.services is not None:
            for name, svc in self.services.services.items():
                ours[svc.pid] = "ZooKeeper" if name == "zookeeper" else "Kafka"

        if self.observer is not None:
            # what the controller does while everything shuts down is not part of the scenario
            self.observer.stop()
        self._stop_brokers()

        if self.controller is not None:
            self.controller.app.stop()
            self.controller.thread.join(60)
            if self.controller.thread.is_alive():
                self.tl.line("FAIL", "the controller did not stop within 60 s")
            else:
                self.report.stopped.append("controller query")
        if self._owns_spark and self.spark is not None:
            stopped = stop_spark(self.spark, self._spark_jvm)
            if stopped is not None:
                self.report.stopped.append(stopped)
        if self.services is not None:
            for name in self.services.down():
                self.report.stopped.append(name)
            self.record_processes()

        self.report.leftovers = [
            f"{what} (pid {pid}: {cmdline(pid)[:80]})" for pid, what in ours.items() if pid_alive(pid)
        ]
        if self._owns_services:
            with contextlib.suppress(OSError):
                (self.run_dir / PROCESSES_FILE).unlink(missing_ok=True)
        if self.report.leftovers:
            self.tl.line("FAIL", "still running: " + "; ".join(self.report.leftovers))
        else:
            self.tl.line("demo", f"stopped {len(ours)} processes ({kinds(ours.values())}); none left running")

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
    return make_demo(options, out or sys.stdout, spark=spark, stop=stop, hard_stop=hard_stop, inspect=inspect).run()


def make_demo(options: DemoOptions, out: TextIO, **kwargs: Any) -> Demo:
    """The demo ``options`` ask for: on simulated brokers (:class:`Demo`), or on real Kafka brokers
    (:class:`livectl.demo.kafka.KafkaDemo`, ``options.kafka``). ``kwargs``: those of :class:`Demo`."""
    if options.kafka:
        from livectl.demo.kafka import KafkaDemo

        return KafkaDemo(options, out, **kwargs)
    return Demo(options, out, **kwargs)
