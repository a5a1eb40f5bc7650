"""Where a store's bodies live in object storage: the ``blobs`` URL, checked without importing
the client library (configuration is validated on every command line start)."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from cargohold._errors import ConfigError
from cargohold._records import KiB

__all__ = ["DEFAULT_THRESHOLD", "parse_location"]

DEFAULT_THRESHOLD = 64 * KiB
"""Bodies larger than this go to the bucket; smaller ones stay in their PostgreSQL row, where a
request to the bucket would cost more than the bytes (and a body of one 64 KiB chunk is one
digest)."""

_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_SEGMENT = re.compile(r"[A-Za-z0-9!_.*'()-]+")


def parse_location(url: str) -> str:
    """The canonical ``s3://bucket/prefix`` of a blob tier URL.

    The bucket and prefix are all a URL may say: the endpoint, region and credentials come from
    the environment, so a URL written in a config file never holds a secret.

    Raises:
        ConfigError: not ``s3://``, no valid bucket name, credentials, a port, a query or a
            fragment in the URL, or a prefix segment that is ``.``, ``..`` or not plain
            ASCII (empty segments, as in a trailing slash, are dropped).
    """
    if not isinstance(url, str):
        raise ConfigError("the blobs URL must be a string like s3://bucket/prefix")
    parts = urlsplit(url.strip())
    if parts.scheme != "s3":
        raise ConfigError("the blobs URL must look like s3://bucket/prefix")
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        raise ConfigError(
            "the blobs URL must not hold credentials: use AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY or a profile"
        )
    if ":" in parts.netloc or parts.query or parts.fragment:
        raise ConfigError(
            "the blobs URL names only a bucket and a prefix: set the endpoint with AWS_ENDPOINT_URL"
        )
    bucket = parts.netloc
    if _BUCKET.fullmatch(bucket) is None or ".." in bucket:
        raise ConfigError("the blobs URL must name a valid S3 bucket (s3://bucket/prefix)")
    segments = [segment for segment in parts.path.split("/") if segment != ""]
    if any(_SEGMENT.fullmatch(segment) is None or segment in (".", "..") for segment in segments):
        raise ConfigError("the blobs URL's prefix must be plain path segments (letters, digits)")
    return "s3://" + "/".join([bucket, *segments])
