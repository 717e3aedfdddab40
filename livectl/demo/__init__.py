"""``livectl demo``: the whole system on one machine, a scripted scenario, and a timeline of what the
controller decided.

What it starts (and stops again, by PID, at the end or on Ctrl-C):

1. ZooKeeper (Debian's package) and Apache Kafka (one KRaft node) on free loopback ports, in the run
   folder (default ``run/demo``; each run starts from empty data folders), through :mod:`livectl.local`;
2. ``--brokers N`` simulated brokers (ids 1..N), **one process each** (``python -m simbrokers``), so a hard
   kill is a real SIGKILL and a controlled shutdown a real SIGTERM; each writes ``brokers/broker-<id>.json``
   (its own view: role, leader, leader epoch, ISR of every partition it hosts);
3. the controller: :class:`streaming.driver.app.ControllerApp` in a thread of this process, on a Spark session in
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

``--brokers kafka`` runs the same steps on three real Apache Kafka brokers instead, through ``livectl
channel``, with a producer and a consumer running throughout (:mod:`.kafka`, :mod:`.traffic`).

While it runs it prints a timeline: ZooKeeper changes (``zk``), the requests the controller sent
(``req``, one line per micro-batch and API, read from ``livectl.requests``) and admin results (``admin``,
from ``livectl.admin-results``). Exit code: 0 every step succeeded, 1 a step or the set-up failed,
130 interrupted. ``--keep-running`` leaves the cluster up after the scenario until Ctrl-C.

:func:`run_demo` is the same thing as a function: tests inject already-running services (``zookeeper``,
``bootstrap``), a ``namespace`` (ZooKeeper chroot and topic-name prefix) and a SparkSession, and get a
:class:`DemoReport` back.

The package, one concern a module: :mod:`.report` (options, results, errors), :mod:`.timeline` (the printed
lines), :mod:`.observer` (what the controller decided and the brokers believe), :mod:`.processes` (broker
processes, process trees, fd redirection), :mod:`.spark` (the demo's own Spark session and its teardown),
:mod:`.steps` (the seven steps), :mod:`.runner` (set-up, waiting, teardown), :mod:`.kafka` and :mod:`.traffic`
(the run on real Kafka brokers and its clients) and :mod:`.cli` (``livectl demo``).
"""

from livectl.demo.cli import register
from livectl.demo.observer import Observer
from livectl.demo.processes import BrokerProcess, descendants, start_broker_process
from livectl.demo.report import DemoError, DemoInterruptedError, DemoOptions, DemoReport, StepResult
from livectl.demo.runner import Demo, run_demo
from livectl.demo.timeline import Timeline

__all__ = [
    "BrokerProcess",
    "Demo",
    "DemoError",
    "DemoInterruptedError",
    "DemoOptions",
    "DemoReport",
    "Observer",
    "StepResult",
    "Timeline",
    "descendants",
    "register",
    "run_demo",
    "start_broker_process",
]
