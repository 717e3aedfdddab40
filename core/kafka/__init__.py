"""Kafka's formats, in one home: what a Kafka engineer finds in ``org.apache.kafka.common.protocol.Errors``,
``kafka.zk.ZkData`` and the controller's request schemas.

* :mod:`core.kafka.error_codes` — Kafka's protocol error codes, one enum;
* :mod:`core.kafka.zkdata` — every znode livectl reads or writes: its path and its JSON, both ways;
* :mod:`core.kafka.requests` — the ``livectl.requests`` envelope and the typed controller requests and
  responses (LeaderAndIsr, UpdateMetadata, StopReplica, ControlledShutdown / AlterPartition responses):
  one encoder and one parser, shared by the core, the sinks, the shell, the admin tools and the simulated
  brokers.

The package decides nothing: it knows formats. It imports the standard library, core's value types and
its strict JSON readers (:mod:`core.codec.fields`, :mod:`core.errors`), and nothing of the controller.
"""
