"""Files livectl keeps beside Spark's checkpoint, through ``pyarrow.fs`` for the checkpoint's URI.

The checkpoint may live on ``file:/…`` (or a bare path), ``hdfs://…`` / ``viewfs://…`` (pyarrow's
``HadoopFileSystem``: needs libhdfs and a Hadoop client on the driver), ``s3a://…`` (pyarrow's
``S3FileSystem``, credentials from AWS's default chain), ``gs://…`` or ``abfs(s)://…``. livectl's own files
there (``livectl.json``, the failover snapshots under ``failover/``, ``audit-progress.json``) and its reading
of Spark's ``commits/`` and ``offsets/`` listings go through that file system, configured by pyarrow's own
means (environment, libhdfs's ``core-site.xml``, AWS's files), not by Spark's ``spark.hadoop.*``. The
store's :attr:`~CheckpointStore.root` is the fully qualified URI that the driver also hands Spark as
``checkpointLocation``, so the two always name one location. A bare path is local unless the session was
started with ``spark.hadoop.fs.defaultFS`` (:meth:`FileSystemCheckpointStore.for_spark`). Nothing here
opens a checkpoint path with ``open()`` or ``pathlib``. Why pyarrow and what changed:
``docs/decisions/2026-12-06-no-private-internals.md``.

:class:`CheckpointStore` is the port; :class:`FileSystemCheckpointStore` the driver's implementation
(executors get their files from the driver with ``SparkContext.addFile``, see :mod:`streaming.query.failover`,
so that only the driver needs the file system's client and credentials); :class:`MemoryCheckpointStore` an
in-memory one for tests and benchmarks, like :mod:`sinks.memory`.

Every location is a URI string; :func:`child` joins names with ``/``.
"""

from __future__ import annotations

import datetime as dt
import os
import posixpath
import re
from collections.abc import Callable
from typing import Any, Protocol, Self, TypeVar

from streaming.errors import StreamingError

T = TypeVar("T")


class CheckpointError(StreamingError):
    """A checkpoint location cannot be opened, read or written. ``uri`` names it, ``reason`` says why
    (for a file system's failure: pyarrow's exception, ``ArrowInvalid: …``, ``FileNotFoundError: …``)."""

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


#: the schemes livectl opens, each with the name pyarrow opens it by (Spark's Hadoop names S3 ``s3a``)
SCHEMES = {
    "file": "file",
    "hdfs": "hdfs",
    "viewfs": "viewfs",
    "s3a": "s3",
    "s3": "s3",
    "gs": "gs",
    "abfs": "abfs",
    "abfss": "abfss",
}
#: how long an operation on ``gs://`` is retried before it fails
GCS_RETRY_LIMIT_S = 30
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):(.*)", re.DOTALL)


def split_uri(location: str) -> tuple[str, str, str]:
    """``(scheme, authority, path)`` of ``location``; the scheme is ``""`` for a bare path. As Hadoop's
    ``Path`` reads one: a scheme is what comes before a ``:`` that no ``/`` precedes, and nothing is
    percent-decoded (``a%20b`` names a folder called that, for Spark and livectl alike)."""
    m = _SCHEME.fullmatch(location)
    if m is None:
        return "", "", location
    scheme, rest = m.group(1).lower(), m.group(2)
    if rest.startswith("//"):
        authority, slash, path = rest[2:].partition("/")
        return scheme, authority, slash + path
    return scheme, "", rest


def qualify(location: str, default_fs: str | None = None) -> str:
    """``location`` fully qualified, in the form Hadoop's ``makeQualified`` gives it (``file:/abs/path``,
    ``hdfs://namenode:8020/path``): the string livectl names the checkpoint by and hands Spark as its
    ``checkpointLocation``. A bare path is local (relative to the working folder), or on ``default_fs``
    (``spark.hadoop.fs.defaultFS``) when that is given and not local, where it must be absolute; a URI with
    no authority (``hdfs:/path``) takes ``default_fs``'s when their schemes match."""
    if not location.strip():
        raise CheckpointError(location, "no location given")
    if "?" in location or "#" in location:
        # pyarrow would read a query as its own options, while Spark's Hadoop Path takes it as part of a name
        raise CheckpointError(location, "a checkpoint location has no query or fragment ('?', '#')")
    scheme, authority, path = split_uri(location)
    fs_scheme, fs_authority, _ = split_uri(default_fs.strip()) if default_fs else ("file", "", "")
    if not scheme:
        scheme, authority = fs_scheme or "file", fs_authority
        if scheme != "file" and not path.startswith("/"):
            raise CheckpointError(
                location,
                f"a relative path on the default file system {default_fs} (spark.hadoop.fs.defaultFS): "
                "give an absolute path or a full URI",
            )
    elif not authority and scheme == fs_scheme:
        authority = fs_authority
    if scheme == "file":
        if authority not in ("", "localhost"):
            raise CheckpointError(location, f"a file: URI with a host ({authority}): give a local path")
        return "file:" + os.path.abspath(path)
    return f"{scheme}://{authority}{posixpath.normpath(re.sub('/+', '/', path or '/'))}"


def _failures() -> tuple[type[BaseException], ...]:
    """What ``pyarrow.fs`` raises for a file system's refusal (an I/O error, a URI it cannot open)."""
    import pyarrow

    return (OSError, pyarrow.ArrowException)


def _reason(e: BaseException) -> str:
    """pyarrow's exception on one line (libhdfs's and the cloud clients' messages span several)."""
    return f"{type(e).__name__}: " + "; ".join(line.strip() for line in str(e).splitlines() if line.strip())


class FileSystemCheckpointStore:
    """The checkpoint through ``pyarrow.fs``: the file system its URI names (see the module docstring).

    Built once per driver, at start: a location livectl cannot open (a scheme not in :data:`SCHEMES`, a
    missing libhdfs, an unreachable name node or bucket, a file where the folder should be…) raises
    :class:`CheckpointError` with the location and pyarrow's reason before anything else happens.
    ``default_fs`` qualifies a bare path (:func:`qualify`); :meth:`for_spark` takes it from the session.
    Every URI a method is given lies under :attr:`root`."""

    def __init__(self, location: str, *, default_fs: str | None = None) -> None:
        import pyarrow.fs as pafs

        self._root = qualify(location, default_fs)
        scheme, authority, path = split_uri(self._root)
        try:
            if scheme == "file":
                self._fs: Any = pafs.LocalFileSystem()
                self._base: str = path
            elif scheme == "gs":
                # pyarrow's GCS retries an operation for 15 minutes by default: a start that would hang that long
                # on an unreachable bucket, and a batch on a failing write
                self._fs = pafs.GcsFileSystem(retry_time_limit=dt.timedelta(seconds=GCS_RETRY_LIMIT_S))
                self._base = f"{authority}{path}"
            else:
                self._fs, self._base = pafs.FileSystem.from_uri(f"{SCHEMES.get(scheme, scheme)}://{authority}{path}")
            # asks the file system itself: libhdfs's name node, the bucket
            kind = self._fs.get_file_info(self._base).type
        except _failures() as e:
            raise CheckpointError(location, f"cannot open it: {_reason(e)}") from e
        if scheme not in SCHEMES:  # pyarrow opens it (gcs://, mock://…), Spark's Hadoop does not
            raise CheckpointError(location, f"cannot open it: not a scheme for Spark's checkpoint: {sorted(SCHEMES)}")
        if kind == pafs.FileType.File:
            raise CheckpointError(location, "cannot open it: a file, not a folder")

    @classmethod
    def for_spark(cls, spark: Any, location: str) -> Self:
        """The store for ``location``, a bare path qualified as the session was told to
        (``spark.hadoop.fs.defaultFS`` in its ``SparkConf``; local without it). Hadoop's own configuration
        files (``core-site.xml``) are not read here: on a cluster, give a full URI."""
        return cls(location, default_fs=spark.sparkContext.getConf().get("spark.hadoop.fs.defaultFS", None))

    @property
    def root(self) -> str:
        return self._root

    def _path(self, uri: str) -> str:
        """The file system's path of ``uri``, which lies under :attr:`root`."""
        root = self._root.rstrip("/")
        if uri.rstrip("/") == root:
            return str(self._base)
        if uri.startswith(root + "/"):
            return self._base.rstrip("/") + uri[len(root) :]
        raise CheckpointError(uri, f"not under {self._root}, the folder this store opens")

    def _call(self, uri: str, what: str, fn: Callable[[], T]) -> T:
        try:
            return fn()
        except _failures() as e:
            raise CheckpointError(uri, f"cannot {what}: {_reason(e)}") from e

    def exists(self, uri: str) -> bool:
        from pyarrow.fs import FileType

        path = self._path(uri)
        return self._call(uri, "check it", lambda: bool(self._fs.get_file_info(path).type != FileType.NotFound))

    def read_text(self, uri: str) -> str:
        path = self._path(uri)

        def read() -> bytes:
            # compression=None: pyarrow would otherwise guess one from the name's extension
            with self._fs.open_input_stream(path, compression=None) as f:
                return bytes(f.read())

        return self._call(uri, "read it", read).decode("utf-8")

    def write_text(self, uri: str, text: str) -> None:
        self._write(uri, text.encode("utf-8"))

    def _make_folder(self, path: str) -> None:
        self._fs.create_dir(path, recursive=True)

    def _write(self, uri: str, data: bytes) -> None:
        """``data`` under a hidden temporary name beside ``uri``, then moved into place, replacing it."""
        from pyarrow.fs import FileType

        folder, name = parent(uri), uri.rstrip("/").rsplit("/", 1)[1]
        where, temporary, target = self._path(folder), self._path(child(folder, f".{name}.tmp")), self._path(uri)

        def write() -> None:
            self._make_folder(where)
            with self._fs.open_output_stream(temporary, compression=None) as out:
                out.write(data)
            try:
                self._fs.move(temporary, target)
            except OSError:
                # HDFS's rename refuses an existing target where a local disk or an object store replaces it:
                # replace it here too, so that a rewrite (livectl.json) behaves the same everywhere
                if self._fs.get_file_info(target).type == FileType.NotFound:
                    raise
                self._fs.delete_file(target)
                self._fs.move(temporary, target)

        self._call(uri, "write it", write)

    def list_names(self, uri: str) -> list[str]:
        from pyarrow.fs import FileSelector

        selector = FileSelector(self._path(uri), allow_not_found=True)
        return self._call(uri, "list it", lambda: [str(i.base_name) for i in self._fs.get_file_info(selector)])


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
