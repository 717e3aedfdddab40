# The livectl image: the controller job (spark-submit client), the admin CLI and the simulated brokers.
FROM python:3.11.11-slim-bookworm
RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /opt/livectl
COPY pyproject.toml README.md ./
COPY core core
COPY streaming streaming
COPY sinks sinks
COPY livectl livectl
COPY simbrokers simbrokers
COPY admin admin
RUN pip install --no-cache-dir .
ENV PYSPARK_PYTHON=python3
ENTRYPOINT ["livectl"]
