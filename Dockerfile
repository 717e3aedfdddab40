# The one livectl image: the controller and its standby (spark-submit clients), the Spark standalone master
# and workers (the pyspark wheel's own spark-class), the admin CLI and the simulated brokers. Every Spark
# process in it has the same Python, the same dependencies and livectl itself, so executors need no archive.
# No Kafka broker in it: the bus is docker-compose.yml's apache/kafka service, the Apache Kafka version the
# tests run (jvm/kafka/pom.xml; docs/kafka-bus.md), checked by tests/unit/deploy/test_compose_file.py.
FROM python:3.11.11-slim-bookworm
RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps \
 && rm -rf /var/lib/apt/lists/*
# the sources (.dockerignore keeps environments and run data out), installed as a wheel: not editable,
# so livectl runs from site-packages with the data files it carries
COPY . /tmp/livectl-src
RUN pip install --no-cache-dir /tmp/livectl-src && rm -rf /tmp/livectl-src
ENV SPARK_HOME=/usr/local/lib/python3.11/site-packages/pyspark \
    PYSPARK_PYTHON=/usr/local/bin/python3
WORKDIR /opt/livectl
# the class-data-sharing archive of Spark's driver classes, made once here (a short Spark job) under a fixed name:
# docker-compose.yml's controllers map it with --driver-java-options (docs/cluster.md)
RUN ln -s "$(livectl class-archive)" /opt/livectl/spark-driver.jsa
ENTRYPOINT ["livectl"]
