"""The long run itself (:class:`LongRun`): the mix on its schedule, the faults, the samples."""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import os
import signal
import statistics
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from kafka import KafkaConsumer, TopicPartition

from bench.harness import procstat
from bench.harness.matrix import ControllerProcess, Matrix, MatrixError, wait_until
from bench.long_run.checks import Epochs, agreement_problems, count_broker_events, read_answers, read_tree
from bench.long_run.config import CREATED_PARTITIONS, CREATED_RF, FAULTS, KINDS, MAX_POOL, Config
from bench.long_run.growth import percentile, window_growth, within_process_growth
from bench.long_run.records import Command, Report, Sample, Window
from core import events as ev
from core.kafka import zkdata
from core.model import PartitionTarget


class NoControllerError(Exception):
    """The end's agreement wait found disagreement and no controller process left to resolve it."""


class LongRun:
    def __init__(
        self,
        m: Matrix,
        cfg: Config,
        log: Callable[[str], None] = print,
        services: Mapping[str, int] | None = None,
    ) -> None:
        self.m, self.cfg, self.log = m, cfg, log
        #: role -> pid of a service whose CPU the samples count too (``zookeeper``, ``kafka``)
        self.services = dict(services or {})
        self.start = 0.0
        self.end = 0.0
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.commands: dict[str, Command] = {}
        #: created topic -> partitions, answered and not being deleted
        self.pool: dict[str, int] = {}
        #: topic -> the request id of its command in flight
        self.busy: dict[str, str] = {}
        self.deleted: list[str] = []
        self.down: set[int] = set()
        self.standby: ControllerProcess | None = None
        self.events: list[dict[str, Any]] = []
        self.samples: list[Sample] = []
        self.epochs = Epochs()
        self.errors: list[str] = []
        #: called after each window's checks (``python -m bench long_run`` writes the windows so far)
        self.on_window: Callable[[LongRun], None] | None = None
        self._n = 0

    def now(self) -> float:
        return time.monotonic() - self.start

    def event(self, what: str, **details: Any) -> None:
        e = {"t": round(self.now(), 1), "what": what, **details}
        with self.lock:
            self.events.append(e)
        self.log(f"[{e['t']:7.1f} s] {what} {details if details else ''}")

    # ------------------------------------------------------------------ admin commands

    def _results(self) -> None:
        """Tail the admin-results topic (read committed): when each command got its final answer."""
        c = KafkaConsumer(
            bootstrap_servers=self.m.bootstrap,
            enable_auto_commit=False,
            group_id=None,
            isolation_level="read_committed",
        )
        try:
            tps = [
                TopicPartition(self.m.topics["results"], p)
                for p in sorted(c.partitions_for_topic(self.m.topics["results"]) or {0})
            ]
            c.assign(tps)
            c.seek_to_beginning(*tps)
            while not self.stop.is_set() or self._unanswered():
                try:
                    polled = c.poll(timeout_ms=500)
                except Exception as e:  # Kafka busy: look again (the end reads the topic back anyway)
                    self.log(f"admin-results: {e!r}")
                    time.sleep(1)
                    continue
                for records in polled.values():
                    for r in records:
                        msg = json.loads(r.value)
                        with self.lock:
                            cmd = self.commands.get(msg.get("request_id", ""))
                            if cmd is None or msg.get("status") == "in_progress" or cmd.answered is not None:
                                continue
                            cmd.answered, cmd.status = self.now(), str(msg.get("status"))
                            self._settle(cmd)
                if self.stop.is_set() and time.monotonic() > self.end + self.cfg.settle_seconds:
                    return
        finally:
            c.close()

    def _unanswered(self) -> int:
        with self.lock:
            return sum(1 for c in self.commands.values() if c.answered is None)

    def _settle(self, cmd: Command) -> None:
        """Under the lock: what an answer changes in the pool."""
        if self.busy.get(cmd.topic) == cmd.request_id:
            del self.busy[cmd.topic]
        if cmd.status != "ok":
            return
        if cmd.kind == "create":
            self.pool[cmd.topic] = CREATED_PARTITIONS
        elif cmd.kind == "add_partitions" and cmd.topic in self.pool:
            self.pool[cmd.topic] += 1

    def _next_command(self) -> ev.AdminCommand | None:
        """The next command of the mix, marked in flight (under the lock)."""
        kind = KINDS[self._n % len(KINDS)]
        rid = f"lr-{self._n:06d}"
        self._n += 1
        idle = sorted(t for t in self.pool if t not in self.busy)
        if kind == "create" and len(self.pool) + len(self.busy) >= MAX_POOL:
            kind = "delete"
        if kind != "create" and not idle:
            kind = "create"
        if kind == "create":
            topic = f"lr-topic-{rid[3:]}"
            cmd: ev.AdminCommand = ev.CreateTopic(rid, topic, CREATED_PARTITIONS, CREATED_RF)
        elif kind == "delete":
            topic = idle[0]
            del self.pool[topic]
            self.deleted.append(topic)
            cmd = ev.DeleteTopic(rid, topic)
        else:
            topic = idle[self._n % len(idle)]
            if kind == "alter_config":
                cmd = ev.AlterTopicConfig(rid, topic, (("retention.ms", str(3_600_000 + self._n)),))
            elif kind == "add_partitions":
                cmd = ev.CreatePartitions(rid, topic, self.pool[topic] + 1)
            else:
                target = self._reassign_target(topic)
                if target is None:
                    return None
                cmd = ev.ReassignPartitions(rid, (PartitionTarget(topic, 0, target),))
        self.busy[topic] = rid
        self.commands[rid] = Command(rid, kind, topic, self.now())
        return cmd

    def _reassign_target(self, topic: str) -> tuple[int, ...] | None:
        """Partition 0's replicas with its last one replaced by a live broker that holds none of them."""
        znode, _ = self.m.znode(zkdata.topic_path(topic))
        if znode is None:
            return None
        current = tuple(znode["partitions"]["0"])
        spare = [b for b in self.m.broker_ids if b not in current and b not in self.down]
        if not spare:
            return None
        return (*current[:-1], spare[self._n % len(spare)])

    def _send_commands(self) -> None:
        due = 0.0
        while not self.stop.is_set():
            with self.lock:
                cmd = self._next_command()
            if cmd is not None:
                try:
                    self.m.send_admin(cmd)
                except Exception as e:  # Kafka did not take it: never sent, so never to be answered
                    with self.lock:
                        gone = self.commands.pop(cmd.request_id)
                        if self.busy.get(gone.topic) == gone.request_id:
                            del self.busy[gone.topic]
                    self.errors.append(f"{cmd.request_id} could not be sent: {e!r}")
            due += self.cfg.command_interval
            self.stop.wait(max(0.0, due - self.now()))

    # ------------------------------------------------------------------ faults

    def _faults(self) -> None:
        due = self.cfg.first_fault or self.cfg.fault_interval / 2
        n = 0
        while not self.stop.wait(max(0.0, due - self.now())):
            kind = FAULTS[n % len(FAULTS)]
            try:
                if kind == "broker":
                    self._broker_fault(self.m.broker_ids[(n // len(FAULTS)) % len(self.m.broker_ids)])
                else:
                    self._takeover()
            except Exception as e:  # said in the report; the run goes on
                self.errors.append(f"{kind} fault at {self.now():.0f} s: {e!r:.500}")
                self.log(f"fault failed: {e}")
            n += 1
            due = max(due + self.cfg.fault_interval, self.now())

    def _broker_fault(self, b: int) -> None:
        with self.lock:
            self.down.add(b)
        proc = self.m.brokers[b]
        proc.signal(signal.SIGKILL)
        with contextlib.suppress(Exception):
            proc.proc.wait(30)
        self.event("broker-kill", broker=b)
        wait_until(f"broker {b}'s registration gone", lambda: b not in self.m.registered_brokers(), 120)
        self.event("broker-gone", broker=b)
        self.stop.wait(max(0.0, self.cfg.broker_down_seconds))
        self.m.start_broker(b)
        wait_until(f"broker {b} registered again", lambda: b in self.m.registered_brokers(), 120)
        with self.lock:
            self.down.discard(b)
        self.event("broker-back", broker=b)

    def _takeover(self) -> None:
        m = self.m
        assert m.zk is not None and m.active is not None and self.standby is not None
        m.wait_waiting(self.standby, timeout=600)
        old, new = m.active, self.standby
        before = int(m.zk.get("/controller_epoch")[0])
        self.epochs.controller(before, "before a takeover")
        old.kill()
        killed = time.monotonic()
        self.event("takeover-kill", controller=old.controller_id, epoch=before)
        m.wait_loaded(new, timeout=600)
        after = int(m.zk.get("/controller_epoch")[0])
        self.epochs.controller(after, "after a takeover")
        if after <= before:
            self.epochs.problems.append(f"takeover at {self.now():.0f} s: controller epoch {before} -> {after}")
        self.event(
            "takeover-loaded", controller=new.controller_id, epoch=after, took_s=round(time.monotonic() - killed, 1)
        )
        self.standby = m.start_controller(self.cfg.controller_extra())
        self.event("standby-started", controller=self.standby.controller_id)

    # ------------------------------------------------------------------ sampling and windows

    def sample(self) -> Sample:
        parents = procstat.parents()
        pids = {os.getpid(): "bench", **{p: r for r, p in self.services.items()}}
        roles: dict[str, procstat.Usage] = {}
        processes: dict[tuple[str, int, str], procstat.Usage] = {}
        for role, c in (("active", self.m.active), ("standby", self.standby)):
            if c is None or not c.alive() or (role == "standby" and c is self.m.active):
                continue
            tree = procstat.controller_tree(c.proc.pid, parents)
            if tree.driver_python is not None:
                roles[f"{role}_python"] = tree.driver_python
                processes[("controller_python", c.proc.pid, role)] = tree.driver_python
            if tree.jvm.processes:
                roles[f"{role}_jvm"] = tree.jvm
                processes[("controller_jvm", c.proc.pid, role)] = tree.jvm
            roles[f"{role}_workers"] = tree.workers
            pids[c.proc.pid] = f"{role}_python"
            pids.update(dict.fromkeys(tree.jvm_pids, f"{role}_jvm"))
            pids.update(dict.fromkeys(tree.worker_pids, f"{role}_workers"))
        brokers = procstat.NOTHING
        for b in self.m.broker_ids:
            proc = self.m.brokers.get(b)
            u = procstat.usage(proc.pid) if proc is not None and proc.running() else None
            if u is not None and proc is not None:
                brokers = brokers + u
                processes[("broker", proc.pid, str(b))] = u
                pids[proc.pid] = "brokers"
        roles["brokers"] = brokers
        cpu = {p: (r, s) for p, r in pids.items() if (s := procstat.cpu_seconds(p)) is not None}
        return Sample(self.now(), roles, processes, cpu, procstat.machine_busy_seconds())

    def _sampler(self) -> None:
        while not self.stop.wait(max(0.0, self.cfg.sample_seconds - self.now() % self.cfg.sample_seconds)):
            s = self.sample()
            with self.lock:
                self.samples.append(s)

    def check_epochs(self, where: str) -> None:
        assert self.m.zk is not None
        self.epochs.controller(int(self.m.zk.get("/controller_epoch")[0]), where)
        self.epochs.see(read_tree(self.m.zk), self.m.views(), where)

    def _window_checks(self) -> None:
        k = 1
        while not self.stop.wait(max(0.0, k * self.cfg.window_seconds - self.now())):
            try:
                self.check_epochs(f"window {k - 1}")
            except Exception as e:  # a read that failed is said, not a reason to stop the run
                self.errors.append(f"window {k - 1}'s epoch check: {e!r}")
            if self.on_window is not None:
                self.on_window(self)
            k += 1

    def windows(self, upto: float | None = None) -> list[Window]:
        """The windows of the run (``upto``: of its first ``upto`` seconds, while it runs)."""
        span = (self.end - self.start) if upto is None else upto
        n = max(1, round(span / self.cfg.window_seconds))
        w = self.cfg.window_seconds
        with self.lock:
            commands = [dataclasses.replace(c) for c in self.commands.values()]
            samples = list(self.samples)
            events = list(self.events)
        out = [Window(i, round(i * w, 1), round(min((i + 1) * w, span), 1)) for i in range(n)]
        for c in commands:
            if c.sent >= span:
                continue
            win = out[min(int(c.sent // w), n - 1)]
            win.commands += 1
            if c.answered is not None:
                win.answered += 1
        for win in out:
            lat = sorted(
                c.answered - c.sent
                for c in commands
                if c.answered is not None and win.start <= c.sent < (win.end if win.index < n - 1 else span + 1e9)
            )
            if lat:
                win.p50_s, win.p99_s, win.max_s = (
                    round(percentile(lat, 0.5), 2),
                    round(percentile(lat, 0.99), 2),
                    round(lat[-1], 2),
                )
            in_window = [s for s in samples if win.start <= s.t < (win.end if win.index < n - 1 else span + 1e9)]
            roles = sorted({r for s in in_window for r in s.roles})
            for r in roles:
                us = [s.roles[r] for s in in_window if r in s.roles]
                win.roles[r] = {
                    "rss_mib": round(statistics.median(u.rss_kib for u in us) / 1024, 1),
                    "threads": max(u.threads for u in us),
                    "fds": max(u.fds for u in us),
                    "processes": max(u.processes for u in us),
                }
        for e in events:
            out[min(int(e["t"] // w), n - 1)].events.append(short_label(e))
        for win in out:
            win.cpu_cores = cpu_cores([s for s in samples if win.start <= s.t <= win.end])
        return out

    # ------------------------------------------------------------------ the whole run

    def run(self, report: Report) -> None:
        cfg, m = self.cfg, self.m
        self.standby = m.start_controller(cfg.controller_extra())
        self.check_epochs("start")
        self.start = time.monotonic()
        self.end = self.start + cfg.minutes * 60
        threads = [
            threading.Thread(target=self._results, name="long-run-results", daemon=True),
            threading.Thread(target=self._send_commands, name="long-run-commands", daemon=True),
            threading.Thread(target=self._faults, name="long-run-faults", daemon=True),
            threading.Thread(target=self._sampler, name="long-run-sampler", daemon=True),
            threading.Thread(target=self._window_checks, name="long-run-windows", daemon=True),
        ]
        for t in threads:
            t.start()
        self.stop.wait(max(0.0, self.end - time.monotonic()))
        self.stop.set()
        self.end = time.monotonic()
        self.log(f"run over after {self.now():.0f} s: {len(self.commands)} commands sent; settling")
        for t in threads[1:]:
            t.join(cfg.settle_seconds)  # a fault in progress finishes: its broker back, its standby started
        settle_from = time.monotonic()
        settle_by = settle_from + cfg.settle_seconds
        threads[0].join(max(1.0, settle_by - time.monotonic()))
        report.windows = self.windows()
        self.finish(report, settle_by)
        report.settle_s = round(time.monotonic() - settle_from, 1)

    def finish(self, report: Report, settle_by: float) -> None:
        m = self.m
        assert m.zk is not None
        problems = report.problems
        problems += self.errors
        # every command answered exactly once: the topic read back from its start
        finals, in_progress, unknown = read_answers(m)
        for rid, c in sorted(self.commands.items()):
            got = finals.get(rid, [])
            if len(got) != 1:
                problems.append(f"{rid} ({c.kind} {c.topic}) answered {len(got)} times: {got}")
            elif got[0] != "ok":
                problems.append(f"{rid} ({c.kind} {c.topic}) answered {got[0]}")
            if in_progress.get(rid, 0) > 1:
                problems.append(f"{rid} got {in_progress[rid]} in_progress answers")
        problems += [f"an answer to {rid}, never sent" for rid in unknown[:5]]
        report.commands = {
            "sent": len(self.commands),
            "answered_once": sum(1 for rid in self.commands if len(finals.get(rid, [])) == 1),
            **{k: sum(1 for c in self.commands.values() if c.kind == k) for k in KINDS},
        }
        lat = sorted(c.answered - c.sent for c in self.commands.values() if c.answered is not None)
        report.latency_s = {
            "p50": round(percentile(lat, 0.5), 2) if lat else None,
            "p99": round(percentile(lat, 0.99), 2) if lat else None,
            "max": round(lat[-1], 2) if lat else None,
        }
        # ZooKeeper and the brokers agree
        with self.lock:
            expected = dict(self.pool)
            gone = list(self.deleted)
        expected.update({t: n for t, n in (self._created_partitions().items()) if t not in gone})
        last: list[str] = []

        def agreed() -> bool:
            assert m.zk is not None
            last[:] = agreement_problems(m, read_tree(m.zk), expected, gone)
            if last and not any(c.alive() for c in m.controllers):
                # nothing will change what ZooKeeper and the brokers hold: said now, not after the settle time
                raise NoControllerError(last)
            return not last

        try:
            wait_until("ZooKeeper and the brokers in agreement", agreed, max(30.0, settle_by - time.monotonic()), 5)
        except MatrixError:
            problems += [f"at the end: {p}" for p in last]
        except NoControllerError:
            exits = ", ".join(f"{c.controller_id}: exit {c.proc.poll()}" for c in m.controllers)
            problems.append(
                f"at the end: no livectl controller was running ({exits}); the agreement was not waited for"
            )
            problems += [f"at the end: {p}" for p in last]
        try:
            self.check_epochs("end")
        except Exception as e:  # said, as the windows' checks are
            problems.append(f"the last epoch check: {e!r}")
        problems += self.epochs.problems
        report.controller_epochs = [e["epoch"] for e in self.events if e["what"] == "takeover-loaded"]
        try:
            report.broker_events = count_broker_events(m)
        except Exception as e:  # a figure, not a check
            self.log(f"broker-events not counted: {e!r}")
        report.events = list(self.events)
        report.growth_per_hour = window_growth(report.windows, self.cfg.warmup_windows, self.cfg.window_seconds)
        report.memory_growth_within_process = within_process_growth(self.samples, self.cfg.window_seconds)

    def _created_partitions(self) -> dict[str, int]:
        """Each created topic (answered ok) and its partitions after the additions answered ok."""
        out: dict[str, int] = {}
        for c in sorted(self.commands.values(), key=lambda c: c.request_id):
            if c.status != "ok":
                continue
            if c.kind == "create":
                out[c.topic] = CREATED_PARTITIONS
            elif c.kind == "add_partitions" and c.topic in out:
                out[c.topic] += 1
        return out


def cpu_cores(samples: list[Sample]) -> dict[str, float]:
    """Each role's average busy cores between the first and the last of ``samples``: the CPU seconds each process
    used between two consecutive samples that both saw it, counted to its role in the later one (a standby that
    took over counts as active from then on), over the time from the first sample to the last."""
    if len(samples) < 2:
        return {}
    span = samples[-1].t - samples[0].t
    out: dict[str, float] = {}
    for before, after in itertools.pairwise(samples):
        for pid, (role, used) in after.cpu.items():
            if pid in before.cpu:
                out[role] = out.get(role, 0.0) + (used - before.cpu[pid][1]) / span
    out["machine"] = (samples[-1].machine_busy_s - samples[0].machine_busy_s) / span
    out["other"] = out["machine"] - sum(v for k, v in out.items() if k != "machine")
    return {k: round(v, 2) for k, v in sorted(out.items())}


def short_label(e: Mapping[str, Any]) -> str:
    what = str(e["what"])
    if "broker" in e:
        return f"{what} {e['broker']}"
    if "controller" in e:
        return f"{what} {e['controller']}"
    return what
