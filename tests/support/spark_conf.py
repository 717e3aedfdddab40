"""A session whose only part is ``spark.conf.get(key, default)``: for code that reads livectl's Spark properties."""

from __future__ import annotations


class FakeConf:
    def __init__(self, values: dict[str, str]) -> None:
        self.values = values

    def get(self, key: str, default: str) -> str:
        return self.values.get(key, default)


class FakeSpark:
    def __init__(self, values: dict[str, str] | None = None) -> None:
        self.conf = FakeConf(dict(values or {}))
