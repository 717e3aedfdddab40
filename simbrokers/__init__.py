"""Simulated Kafka brokers for livectl's demo, tests and benchmarks.

They behave like ZooKeeper-era Kafka brokers toward the controller and talk to it only through
ZooKeeper and the topics:

* register ``/brokers/ids/<id>`` (ephemeral, Kafka's v5 JSON, own kazoo session each; broker epoch =
  czxid) — :mod:`simbrokers.registration`;
* read their requests from ``livectl.requests`` (key = broker id) — the wire contract lives in
  :mod:`core.kafka.envelope`, :mod:`core.kafka.requests` and :mod:`core.kafka.request_encoding` /
  :mod:`core.kafka.request_parsing` alone;
* answer on ``livectl.broker-events`` with :mod:`core.events` JSON: LeaderAndIsrResponse,
  StopReplicaResponse, AlterPartition (one record a request of many partitions:
  :mod:`simbrokers.alter_requests`), ControlledShutdown, LogDirFailure.

Pure logic, fed messages and a clock value (unit-tested without services):
:mod:`simbrokers.broker` (Kafka's broker-side checks, metadata cache, faults),
:mod:`simbrokers.partition` (leader/follower, HW, ISR shrink/expand, epoch-based truncation, acknowledged
records), :mod:`simbrokers.log` (replica log + leader-epoch cache), :mod:`simbrokers.shutdown`
(controlled shutdown with retries), :mod:`simbrokers.fabric` (in-process fetch routing and the
acknowledged-loss audit).

The log fabric: followers pull from leaders like Kafka's fetcher threads. Within one process a fetch is
a direct call on the leader object (:class:`simbrokers.fabric.LocalFabric`); across processes it is one
JSON line over TCP loopback to the endpoint the leader registered (:mod:`simbrokers.fetchnet`: a fetch session
per connection, sending only what changed), found
from LeaderAndIsr ``liveLeaders`` / UpdateMetadata ``liveBrokers`` — no ZooKeeper or topic involved.

Run: ``python -m simbrokers --brokers 1,2,3 [--zookeeper HOST:PORT] [--bootstrap-server HOST:PORT]``
(several processes with different ids make a multi-process cluster; without the addresses, the lookup the
admin commands use: :func:`sinks.local_services.default_zookeeper`). Every option: ``python -m simbrokers
--help`` and docs/operations.md, "Simulated brokers". Faults and shutdowns on command
through the control topic ``livectl.simbrokers.control`` (:mod:`simbrokers.control`), most easily with
``livectl-simbrokers fault N slow-follower|stuck-follower|disk-failure|clear|produce-rate``,
``livectl-simbrokers shutdown N`` and ``livectl-simbrokers kill N`` (:mod:`simbrokers.ctl`).
SIGTERM = controlled shutdown of every broker of the process; SIGKILL = they vanish and their sessions
expire. ``--status-file`` writes every broker's partitions (role, leader epoch, ISR, LEO, HW,
acknowledged) and the acknowledged-loss audit each second.
"""
