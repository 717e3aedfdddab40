"""The one place where events, decisions and the failover snapshot become JSON and JSON becomes values.

:mod:`core.codec.events` writes and reads the versioned JSON form of every event and
:mod:`core.codec.decisions` that of every decision; :mod:`core.codec.decision_rows` lays decisions out as a
bucket's output rows and :mod:`core.codec.dry_run_details` puts a dry run's decisions in an admin answer. The
event decoders live beside them by family (:mod:`core.codec.admin`, :mod:`core.codec.broker`,
:mod:`core.codec.driver` with :mod:`core.codec.snapshot`, :mod:`core.codec.zk_paths`), over
:mod:`core.codec.values` (the model's values out of JSON, by Kafka's rules). The strict readers of any JSON
field are :mod:`core.jsonform`, below both this package and :mod:`core.kafka` (which reads Kafka's znode JSON
with them).
"""
