"""JVM options for every Spark JVM the tests start (not the product's: it ships no JIT option)."""

from __future__ import annotations

#: a test's JVMs live seconds to minutes, too short for C2's compiling to pay back; with C1 only a failover
#: test's processes used about 40% less CPU (CI runs on two busy cores; docs/development.md)
SHORT_LIVED_JIT = "-XX:TieredStopAtLevel=1"

#: the Kafka and ZooKeeper servers the tests start (``KAFKA_OPTS``, ``SERVER_JVMFLAGS``): C1 as above, and one
#: collector thread rather than G1's several, for heaps of a few hundred MB on two shared cores
SHORT_LIVED_SERVER = f"{SHORT_LIVED_JIT} -XX:+UseSerialGC"
