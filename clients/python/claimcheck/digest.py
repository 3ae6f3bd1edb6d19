"""SHA-256 of files and streams, and the Content-Digest header (RFC 9530)."""

from __future__ import annotations

import base64
import hashlib
import re
from typing import BinaryIO

__all__ = ["CHUNK", "content_digest", "file_sha256", "parse_content_digest"]

# Bytes read or written at a time when hashing, uploading or downloading:
# memory stays at this, whatever the payload's size.
CHUNK = 1 << 20


def file_sha256(f: BinaryIO | str) -> tuple[bytes, int]:
    """Read a file (a path, or a binary file object read from where it
    stands to its end) and return its SHA-256 (32 bytes) and size in bytes,
    CHUNK bytes at a time."""
    if isinstance(f, str):
        with open(f, "rb") as fh:
            return file_sha256(fh)
    h = hashlib.sha256()
    n = 0
    while True:
        b = f.read(CHUNK)
        if not b:
            return h.digest(), n
        h.update(b)
        n += len(b)


def content_digest(sha256: bytes) -> str:
    """The Content-Digest field value for a SHA-256 (RFC 9530 section 2):
    sha-256=:BASE64:."""
    if len(sha256) != 32:
        raise ValueError(f"a SHA-256 is 32 bytes, not {len(sha256)}")
    return "sha-256=:" + base64.b64encode(sha256).decode("ascii") + ":"


_DIGEST_MEMBER = re.compile(r"\s*([a-z0-9_-]+)\s*=\s*:([A-Za-z0-9+/=]*):\s*")


def parse_content_digest(value: str) -> bytes | None:
    """The SHA-256 a Content-Digest or Repr-Digest field value gives, or
    None when it gives none (other algorithms are ignored). Raises
    ValueError for a sha-256 member that is not 32 bytes of base64."""
    for member in value.split(","):
        m = _DIGEST_MEMBER.fullmatch(member)
        if m and m.group(1) == "sha-256":
            try:
                d = base64.b64decode(m.group(2), validate=True)
            except ValueError:
                raise ValueError("Content-Digest: sha-256 is not base64") from None
            if len(d) != 32:
                raise ValueError(f"Content-Digest: sha-256 of {len(d)} bytes")
            return d
    return None
