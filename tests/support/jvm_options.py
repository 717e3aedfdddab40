"""JVM options for every Spark JVM the tests start (not the product's: it ships no JIT option)."""

from __future__ import annotations

#: a test's JVMs live seconds to minutes, too short for C2's compiling to pay back; with C1 only a failover
#: test's processes used about 40% less CPU (CI runs on two busy cores; docs/development.md)
SHORT_LIVED_JIT = "-XX:TieredStopAtLevel=1"
