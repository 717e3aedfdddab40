"""Files livectl keeps beside Spark's checkpoint, through Hadoop's FileSystem for the checkpoint's URI.

The checkpoint may live on any file system Spark can open — ``file:///…``, ``hdfs://…``, ``s3a://…``; a
bare path means Hadoop's default file system (``fs.defaultFS``), relative to its working directory, as
Spark itself treats ``checkpointLocation``. livectl's own files there (``livectl.json``, the failover
snapshots under ``failover/``) and its reading of Spark's ``commits/`` and ``offsets/`` listings go through
the same API, with the Hadoop configuration Spark uses for the checkpoint (the session's, so
``spark.hadoop.*`` settings apply), so that active and standby drivers on different machines see one
checkpoint. Nothing here opens a checkpoint path with ``open()`` or ``pathlib`` (a file written is staged
in the driver's own temporary folder, and Hadoop copies it to the checkpoint).

:class:`CheckpointStore` is the port; :class:`HadoopCheckpointStore` the driver's implementation (it
needs the driver's JVM gateway; Python workers have none: executors get their files from the driver with
``SparkContext.addFile``, see :mod:`streaming.query.failover`); :class:`MemoryCheckpointStore` an in-memory one
for tests and benchmarks, like :mod:`sinks.memory`.

Every location is a URI string; :func:`child` joins names with ``/``.
"""

from __future__ import annotations

import os
import pathlib
import tempfile
from typing import Any, Protocol

from streaming.errors import StreamingError


class CheckpointError(StreamingError):
    """A checkpoint location cannot be opened, read or written. ``uri`` names it, ``reason`` says why
    (for a Hadoop failure: the Java exception as Spark reported it)."""

    def __init__(self, uri: str, reason: str) -> None:
        self.uri = uri
        self.reason = reason
        super().__init__(f"checkpoint {uri}: {reason}")


def child(uri: str, *names: str) -> str:
    """``uri`` with ``names`` appended, ``/``-separated (a URI, not an OS path)."""
    return "/".join([uri.rstrip("/"), *names])


def parent(uri: str) -> str:
    """The folder holding ``uri``."""
    return uri.rstrip("/").rsplit("/", 1)[0]


class CheckpointStore(Protocol):
    """The checkpoint's file system. ``root`` is the checkpoint's fully qualified URI."""

    @property
    def root(self) -> str: ...

    def exists(self, uri: str) -> bool: ...

    def read_text(self, uri: str) -> str: ...

    def write_text(self, uri: str, text: str) -> None:
        """Write the whole file: to a hidden temporary name, then renamed into place, so that a reader never
        sees half a file. The folder is created when missing."""
        ...

    def list_names(self, uri: str) -> list[str]:
        """Names of the entries of folder ``uri`` (empty when it does not exist)."""
        ...


def batch_ids(store: CheckpointStore, folder: str) -> list[int]:
    """The micro-batch ids Spark recorded in ``folder`` (its ``commits/`` or ``offsets/``), ascending;
    its ``.crc`` and temporary files are not batches."""
    return sorted(int(name) for name in store.list_names(folder) if name.isdigit())


class HadoopCheckpointStore:
    """The checkpoint through Hadoop's ``FileSystem`` in the driver's JVM (py4j).

    Built once per driver, at start: a URI whose scheme Spark cannot open (no ``FileSystem`` for it on
    the classpath, a malformed URI, an unreachable name node…) raises :class:`CheckpointError` with the URI
    and Spark's reason before anything else happens."""

    def __init__(self, spark: Any, checkpoint_dir: str) -> None:
        from py4j.protocol import Py4JJavaError

        self._jvm = spark.sparkContext._jvm
        # the configuration Spark's streaming engine opens the checkpoint with (spark.hadoop.* included)
        self._conf = spark._jsparkSession.sessionState().newHadoopConf()
        # py4j resolves ``jvm.org.apache.hadoop.fs.Path`` one name at a time, a round trip each: once here
        self._path_class = self._jvm.org.apache.hadoop.fs.Path
        try:
            path = self._path_class(checkpoint_dir)
            self._fs = path.getFileSystem(self._conf)
            self._root = str(self._fs.makeQualified(path).toString())
        except Py4JJavaError as e:
            raise CheckpointError(checkpoint_dir, f"Spark cannot open it: {_java_reason(e)}") from None
        except Exception as e:  # py4j wraps an illegal URI (e.g. "a:b c") in its own errors
            raise CheckpointError(checkpoint_dir, f"Spark cannot open it: {e}") from None

    @property
    def root(self) -> str:
        return self._root

    def _path(self, uri: str) -> Any:
        return self._path_class(uri)

    def _call(self, uri: str, what: str, fn: Any) -> Any:
        from py4j.protocol import Py4JJavaError

        try:
            return fn()
        except Py4JJavaError as e:
            raise CheckpointError(uri, f"cannot {what}: {_java_reason(e)}") from None

    def exists(self, uri: str) -> bool:
        return bool(self._call(uri, "check it", lambda: self._fs.exists(self._path(uri))))

    def read_text(self, uri: str) -> str:
        def read() -> bytes:
            stream = self._fs.open(self._path(uri))
            try:
                return bytes(self._jvm.org.apache.hadoop.io.IOUtils.readFullyToByteArray(stream))
            finally:
                stream.close()

        data: bytes = self._call(uri, "read it", read)
        return data.decode("utf-8")

    def write_text(self, uri: str, text: str) -> None:
        folder, name = parent(uri), uri.rstrip("/").rsplit("/", 1)[1]
        tmp = child(folder, f".{name}.tmp")

        # the bytes go to the JVM as a local file Hadoop copies, not through py4j: py4j sends a byte array as
        # base64 text over its socket, 0.15-0.35 s for a 5 MB failover slice, on a takeover's path (a local
        # file and the copy: 0.03-0.05 s; docs/decisions/2026-11-24-warm-standby-read-ahead.md); the file
        # is the driver's own, in its temporary folder, never a checkpoint path
        fd, local = tempfile.mkstemp(prefix="livectl-write-", suffix=".tmp")

        def write() -> None:
            self._fs.mkdirs(self._path(folder))
            temporary = self._path(tmp)
            # delSrc: Hadoop removes the local copy once copied; overwrite: a temporary left by a crash
            self._fs.copyFromLocalFile(True, True, self._path(pathlib.Path(local).as_uri()), temporary)
            target = self._path(uri)
            # HDFS's rename refuses an existing target where the local file system replaces it: make both
            # replace, so a rewrite (livectl.json) behaves the same everywhere
            if not self._fs.rename(temporary, target):
                self._fs.delete(target, False)
                if not self._fs.rename(temporary, target):
                    raise CheckpointError(uri, f"cannot rename {tmp} into place")

        try:
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(text.encode("utf-8"))
            except OSError as e:
                raise CheckpointError(uri, f"cannot stage it in the driver's temporary folder: {e}") from None
            self._call(uri, "write it", write)
        finally:
            if os.path.exists(local):  # not staged, or the copy failed before Hadoop removed it
                os.remove(local)

    def list_names(self, uri: str) -> list[str]:
        def names() -> list[str]:
            path = self._path(uri)
            if not self._fs.exists(path):
                return []
            return [str(status.getPath().getName()) for status in self._fs.listStatus(path)]

        result: list[str] = self._call(uri, "list it", names)
        return result


def _java_reason(e: Any) -> str:
    """The Java exception's own ``Class: message`` line (without py4j's stack trace)."""
    java = getattr(e, "java_exception", None)
    return str(java.toString()) if java is not None else str(e).strip().splitlines()[0]


class MemoryCheckpointStore:
    """A checkpoint held in a dict (tests and benchmarks; not for a real query, whose Spark state lives
    beside it). ``remove`` drops a folder, as deleting an old checkpoint would."""

    def __init__(self, root: str = "memory:/checkpoint") -> None:
        self._root = root.rstrip("/")
        self.files: dict[str, str] = {}

    @property
    def root(self) -> str:
        return self._root

    def exists(self, uri: str) -> bool:
        prefix = uri.rstrip("/") + "/"
        return uri in self.files or any(k.startswith(prefix) for k in self.files)

    def read_text(self, uri: str) -> str:
        try:
            return self.files[uri]
        except KeyError:
            raise CheckpointError(uri, "cannot read it: no such file") from None

    def write_text(self, uri: str, text: str) -> None:
        self.files[uri] = text

    def list_names(self, uri: str) -> list[str]:
        prefix = uri.rstrip("/") + "/"
        return sorted({k[len(prefix) :].split("/", 1)[0] for k in self.files if k.startswith(prefix)})

    def remove(self, uri: str) -> None:
        prefix = uri.rstrip("/") + "/"
        for k in [k for k in self.files if k == uri or k.startswith(prefix)]:
            del self.files[k]
