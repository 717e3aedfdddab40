"""Apache Kafka beside a client over a link a test degrades: two test hosts (:mod:`bench.harness.netns`, so as
root), ``kafka`` running Apache Kafka with the test's topics written and ``reader`` for the client, whose link to
Kafka goes through ``tc``'s token bucket filter when the test says (:meth:`KafkaLink.degrade`). The slow-link
tests of the source's read and of its data-loss check start here."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic

from bench.harness.netns import Host, Network, Shaping, network, start_kafka
from livectl import local


@dataclass(frozen=True)
class KafkaLink:
    """Apache Kafka in a host of its own (``kafka_host``) and a client's host (``reader``) on one :class:`Network`
    (:func:`kafka_and_a_reader`): the reader's link to Kafka is what a test degrades."""

    net: Network
    kafka_host: Host
    reader: Host
    kafka: local.Service

    def degrade(self, rate: str) -> None:
        """The reader's link to Kafka through ``tbf`` at ``rate`` (``tc``'s notation, e.g. ``256kbit``), both ways,
        with :class:`~bench.harness.netns.Shaping`'s queue and burst."""
        self.net.degrade(self.reader, [self.kafka_host], Shaping(rate=rate))

    def shaped(self) -> dict[str, dict[str, int]]:
        """The reader's ``tbf`` statistics (:meth:`~bench.harness.netns.Network.shaped`)."""
        return self.net.shaped(self.reader)


@contextlib.contextmanager
def kafka_and_a_reader(run_dir: Path, topics: Mapping[str, Sequence[bytes]]) -> Iterator[KafkaLink]:
    """A :func:`~bench.harness.netns.network` of two hosts: ``kafka`` running Apache Kafka
    (:func:`~bench.harness.netns.start_kafka`, under ``run_dir``) and ``reader`` for a client of it. ``topics``:
    each made with one partition and one replica, its records written (``acks=all``) before the link is handed
    over. Kafka stops and the network closes at the end."""
    with network() as net:
        kafka_host, reader = net.add_host("kafka"), net.add_host("reader")
        kafka = start_kafka(kafka_host, run_dir)
        try:
            admin = KafkaAdminClient(bootstrap_servers=kafka.bootstrap)
            try:
                admin.create_topics([NewTopic(name, 1, 1) for name in topics])
            finally:
                admin.close()
            producer = KafkaProducer(bootstrap_servers=kafka.bootstrap, acks="all")
            try:
                for name, records in topics.items():
                    for record in records:
                        producer.send(name, record)
                producer.flush()
            finally:
                producer.close()
            yield KafkaLink(net, kafka_host, reader, kafka)
        finally:
            local.stop_kafka(kafka)
