"""Kafka's formats, in one home: what a Kafka engineer finds in ``org.apache.kafka.common.protocol.Errors``,
``kafka.zk.ZkData`` and the controller's request schemas.

* :mod:`core.kafka.error_codes` — Kafka's protocol error codes, one enum;
* :mod:`core.kafka.zkdata` — every znode livectl reads or writes: its path and its JSON, both ways;
* :mod:`core.kafka.zksnapshot` — those znodes read into the snapshot a new controller starts from;
* :mod:`core.kafka.requests` — the typed controller requests and responses (LeaderAndIsr,
  UpdateMetadata, StopReplica, ControlledShutdown / AlterPartition responses), their API names and send
  order;
* :mod:`core.kafka.request_encoding` — their one wire form, written (a caller may keep an ``EncodeMemo``
  of encodings), and :mod:`core.kafka.request_parsing` — the same, read back strictly;
* :mod:`core.kafka.configs` — Kafka's topic configs (``LogConfig``) and dynamic broker configs: names,
  types, ranges, checked and worded as Kafka does;
* :mod:`core.kafka.replicas` — Kafka's rule for a partition's replica list;
* :mod:`core.kafka.envelope` — the ``livectl.requests`` message around a request: one encoder (the request
  sink's) and one parser (the simulated brokers' and the admin tools').
* :mod:`core.kafka.log_dirs` — the brokers' replica log sizes in the shape of the DescribeLogDirs response
  (API key 35), as the simulated brokers and the controller channel publish them.

The package decides nothing: it knows formats. It imports the standard library, core's value types and
its strict JSON readers (:mod:`core.jsonform`, :mod:`core.errors`), and nothing of the controller.
"""
