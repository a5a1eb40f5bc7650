"""The blob tier: bodies in an S3-compatible bucket, records in PostgreSQL.

:class:`ObjectTier` is the PostgreSQL store's client of one bucket and prefix, named by a URL
(``s3://bucket/prefix``). It knows object keys, transfers and the hashing done while bytes
stream; it knows nothing of records, owners or quotas, and decides nothing about when an object
may be deleted: that protocol lives in :mod:`cargohold.store._postgres`, where the rows are.

Keys. Every upload goes to a key of its own, ``sha256/<digest>/<nonce>`` under the prefix: the
SHA-256 of the bytes and 128 random bits. Identical bytes are still stored once per tenant (the
blob row in PostgreSQL names the one object every record of those bytes uses), but an object key
is never written twice. That is what makes deleting safe across two systems that share no
transaction: ``gc`` deletes exactly the object a removed row named, and a writer re-adding the
same bytes a moment later uploads to a new key that no pending delete can reach. A key made of
the digest alone cannot be fenced that way (S3 has no conditional delete by generation; the ETag
of identical bytes is identical). No key holds a tenant, user or session.

Transfers. ``obstore`` (Rust ``object_store``) does the HTTP work: multipart uploads with parts
sent concurrently for bodies over :data:`PART_SIZE`, ranged GETs, streaming GETs, bulk deletes,
and retries with backoff of every request (all of ours are idempotent: a key is written once,
GET/HEAD/DELETE change nothing twice) within a bounded total time.

Configuration and credentials come from the standard AWS variables (``AWS_ENDPOINT_URL``,
``AWS_REGION``, ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``,
``AWS_ALLOW_HTTP``...), read by ``object_store`` itself, or with ``AWS_PROFILE`` set and no key
in the environment, from boto3's profile chain. Nothing here stores, logs or shows a credential.

Errors are translated in :func:`_translated` with fixed texts: ``object_store``'s messages name
the endpoint, the bucket and the key.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import secrets
from collections.abc import Iterable, Iterator, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from cargohold._errors import CargoholdError, ConfigError, StoreError, StoreUnavailableError
from cargohold._records import MiB
from cargohold.store._location import DEFAULT_THRESHOLD, parse_location

try:
    import obstore
    import obstore.exceptions
    from obstore.store import S3Store
except ImportError as exc:  # tests/test_blobs_config.py hides obstore to see this
    raise ConfigError("the object storage tier needs obstore: pip install 'cargohold[s3]'") from exc

if TYPE_CHECKING:
    from obstore.store import ClientConfig, RetryConfig

__all__ = ["DEFAULT_THRESHOLD", "PART_SIZE", "ObjectMissing", "ObjectTier", "parse_location"]

PART_SIZE = 8 * MiB
"""Bodies over this are uploaded in parts of this size, sent concurrently (S3 wants 5 MiB at
least for every part but the last)."""

_PART_CONCURRENCY = 4
_STREAM_PIECE = 1 * MiB
"""The least a streamed GET hands over at a time (a whole number of 64 KiB chunks): the hash
runs while the next piece arrives."""
_DELETE_BATCH = 500
_KEY = re.compile(r"sha256/([0-9a-f]{64})/([0-9a-f]{32})")


class ObjectMissing(Exception):
    """The object a row names is not in the bucket (deleted, lost, or never written)."""


@contextlib.contextmanager
def _translated(*, missing: bool) -> Iterator[None]:
    """Turn ``obstore``'s errors into cargohold's, without their text.

    Args:
        missing: Whether "not found" means the object is missing (a read, a head), raised as
            :class:`ObjectMissing`; otherwise (a put, a list) it means the bucket is.
    """
    try:
        yield
    except (CargoholdError, ObjectMissing):
        raise
    except (FileNotFoundError, obstore.exceptions.NotFoundError) as exc:
        if missing:
            raise ObjectMissing from exc
        raise StoreError("the object store's bucket does not exist") from exc
    except (
        obstore.exceptions.PermissionDeniedError,
        obstore.exceptions.UnauthenticatedError,
    ) as exc:
        raise StoreError("the object store refused the credentials or lacks a permission") from exc
    except (obstore.exceptions.BaseError, OSError, RuntimeError, ValueError) as exc:
        # GenericError is what a refused connection, a timeout, a reset mid-body or a 5xx
        # that outlived its retries all become.
        raise StoreUnavailableError(
            "the object store could not be reached, failed, or did not answer in time"
        ) from exc


def _credentials(environ: Mapping[str, str]) -> Any:
    """boto3's profile chain when ``AWS_PROFILE`` names one and no key is in the environment;
    else ``None``, and ``object_store`` reads the environment (and the container and instance
    credentials) itself."""
    if not environ.get("AWS_PROFILE") or environ.get("AWS_ACCESS_KEY_ID"):
        return None
    try:
        from obstore.auth.boto3 import Boto3CredentialProvider
    except ImportError as exc:
        raise ConfigError("AWS_PROFILE needs boto3 installed (pip install boto3)") from exc
    try:
        return Boto3CredentialProvider()
    except Exception as exc:  # botocore's own errors name the profile and its files
        raise ConfigError("the AWS profile named by AWS_PROFILE gives no credentials") from exc


def _allow_http(environ: Mapping[str, str]) -> bool:
    return environ.get("AWS_ALLOW_HTTP", "").strip().lower() in ("1", "true", "yes")


class ObjectTier:
    """One bucket and prefix holding bodies, with bounded requests.

    Args:
        url: ``s3://bucket/prefix``.
        threshold: Bodies larger than this many bytes go to the bucket.
        timeout: Seconds one request may take, and the time after which a failing request is
            no longer retried; an operation fails within about twice this.
        retries: How many times a failed request is retried (with backoff).
        environ: Where the AWS variables are read (the process environment when omitted).

    Raises:
        ConfigError: a bad URL, threshold or timeout.
    """

    def __init__(
        self,
        url: str,
        *,
        threshold: int = DEFAULT_THRESHOLD,
        timeout: float = 30.0,
        retries: int = 2,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.location = parse_location(url)
        if isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 0:
            raise ConfigError("the blob tier's threshold must be an integer of 0 or more")
        if not isinstance(timeout, int | float) or isinstance(timeout, bool) or not timeout > 0:
            raise ConfigError("the blob tier's timeout must be a positive number of seconds")
        self.threshold = threshold
        env = os.environ if environ is None else environ
        bucket, _, prefix = self.location.removeprefix("s3://").partition("/")
        wait = timedelta(seconds=float(timeout))
        client: ClientConfig = {
            "timeout": wait,
            "connect_timeout": min(wait, timedelta(seconds=5)),
            # Passing client options replaces the ones object_store would read from the
            # environment, so the plain-HTTP switch for a local endpoint is read here.
            "allow_http": _allow_http(env),
        }
        retry: RetryConfig = {
            "max_retries": max(0, int(retries)),
            "retry_timeout": wait,
            "backoff": {
                "init_backoff": timedelta(milliseconds=50),
                "max_backoff": timedelta(seconds=2),
                "base": 2,
            },
        }
        with _translated(missing=False):
            self._store = S3Store(
                bucket,
                prefix=prefix or None,
                client_options=client,
                retry_config=retry,
                credential_provider=_credentials(env),
            )

    def __repr__(self) -> str:
        return "ObjectTier()"

    def holds(self, size: int) -> bool:
        """Whether a body of ``size`` bytes belongs in the bucket."""
        return size > self.threshold

    @staticmethod
    def new_nonce() -> str:
        """A fresh key suffix: 128 random bits, never reused."""
        return secrets.token_hex(16)

    @staticmethod
    def key(digest: str, nonce: str) -> str:
        """The object key (under the prefix) of one upload of ``digest``.

        Raises:
            StoreError: the digest or the nonce is not one the store makes (a row read from a
                damaged database): no key outside ``sha256/<64 hex>/<32 hex>`` is ever built.
        """
        key = f"sha256/{digest}/{nonce}"
        if not isinstance(digest, str) or not isinstance(nonce, str) or not _KEY.fullmatch(key):
            raise StoreError("a blob row of the store is malformed: run `cargohold verify`")
        return key

    # -- transfers ----------------------------------------------------------------------------

    def upload(self, digest: str, nonce: str, data: bytes) -> None:
        """Write ``data`` to its key: whole or not at all (S3 shows no partial object)."""
        key = self.key(digest, nonce)
        with _translated(missing=False):
            if len(data) > PART_SIZE:
                obstore.put(
                    self._store,
                    key,
                    _parts(data),
                    use_multipart=True,
                    chunk_size=PART_SIZE,
                    max_concurrency=_PART_CONCURRENCY,
                )
            else:
                obstore.put(self._store, key, data, use_multipart=False)

    def size(self, digest: str, nonce: str) -> int | None:
        """The stored size of the object, ``None`` when there is none (a HEAD request)."""
        try:
            with _translated(missing=True):
                return int(obstore.head(self._store, self.key(digest, nonce))["size"])
        except ObjectMissing:
            return None

    def read_whole(self, digest: str, nonce: str, size: int) -> bytes | None:
        """The whole body, hashed while it streams in; ``None`` when it is not ``size`` bytes
        hashing to ``digest``.

        Raises:
            ObjectMissing: no such object.
        """
        hasher = hashlib.sha256()
        pieces: list[Any] = []
        received = 0
        with _translated(missing=True):
            result = obstore.get(self._store, self.key(digest, nonce))
            for piece in _stream(result):
                received += len(piece)
                if received > size:
                    return None
                hasher.update(piece)
                pieces.append(piece)
        if received != size or hasher.hexdigest() != digest:
            return None
        return b"".join(pieces)

    def read_span(self, digest: str, nonce: str, start: int, end: int) -> bytes:
        """Bytes ``[start, end)`` of the object (a ranged GET); shorter when the object is.

        Raises:
            ObjectMissing: no such object.
        """
        if end <= start:
            return b""
        with _translated(missing=True):
            try:
                data = obstore.get_range(self._store, self.key(digest, nonce), start=start, end=end)
            except obstore.exceptions.GenericError:
                # A range past a shortened object's end is refused; say so as short bytes, after
                # making sure the object is there at all.
                if self.size(digest, nonce) is None:
                    raise ObjectMissing from None
                return b""
            return bytes(data)

    def scan(self, digest: str, nonce: str, chunk_size: int) -> tuple[int, str, bytes]:
        """Stream the object through the hashes ``verify`` checks, holding one piece at a time:
        its size, its SHA-256 and its per-chunk digests.

        Raises:
            ObjectMissing: no such object.
        """
        whole = hashlib.sha256()
        chunk = hashlib.sha256()
        in_chunk = 0
        size = 0
        digests: list[bytes] = []
        with _translated(missing=True):
            result = obstore.get(self._store, self.key(digest, nonce))
            for piece in _stream(result):
                view = memoryview(piece)
                whole.update(view)
                size += len(view)
                while len(view):
                    take = min(chunk_size - in_chunk, len(view))
                    chunk.update(view[:take])
                    in_chunk += take
                    view = view[take:]
                    if in_chunk == chunk_size:
                        digests.append(chunk.digest())
                        chunk, in_chunk = hashlib.sha256(), 0
        if in_chunk or not digests:
            digests.append(chunk.digest())
        return size, whole.hexdigest(), b"".join(digests)

    def delete(self, objects: Iterable[tuple[str, str]]) -> None:
        """Delete these ``(digest, nonce)`` objects; one already gone counts as deleted."""
        keys = [self.key(digest, nonce) for digest, nonce in objects]
        for start in range(0, len(keys), _DELETE_BATCH):
            with _translated(missing=False):
                obstore.delete(self._store, keys[start : start + _DELETE_BATCH])

    def listing(self) -> Iterator[tuple[str, str] | None]:
        """Every object under the prefix: ``(digest, nonce)`` for a key the store made,
        ``None`` for any other."""
        with _translated(missing=False):
            for batch in obstore.list(self._store, chunk_size=1000):
                for meta in batch:
                    found = _KEY.fullmatch(str(meta["path"]))
                    yield (found.group(1), found.group(2)) if found else None

    def put_raw_for_tests(self, key: str, data: bytes) -> None:
        """Write ``data`` at ``key`` under the prefix, bypassing every check (damage tests)."""
        with _translated(missing=False):
            obstore.put(self._store, key, data, use_multipart=False)

    def get_raw_for_tests(self, key: str) -> bytes:
        """The bytes at ``key`` under the prefix, unverified (damage tests)."""
        with _translated(missing=True):
            return bytes(obstore.get(self._store, key).bytes())


def _parts(data: bytes) -> Iterator[memoryview]:
    """The body as views of one part each, fed to the multipart upload without a copy."""
    view = memoryview(data)
    for offset in range(0, len(view), PART_SIZE):
        yield view[offset : offset + PART_SIZE]


def _stream(result: Any) -> Iterator[Any]:
    """The pieces of a GET's body as they arrive."""
    yield from result.stream(min_chunk_size=_STREAM_PIECE)
