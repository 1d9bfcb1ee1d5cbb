"""How values cross psycopg for this store: text made NUL-safe both ways, and pgvector's
binary `vector` read as raw bytes, many of which become one float32 matrix.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import psycopg
from pgvector.psycopg import register_vector
from psycopg.abc import Buffer
from psycopg.adapt import Loader
from psycopg.pq import Format
from psycopg.types.string import StrBinaryDumper, StrDumperUnknown, TextBinaryLoader, TextLoader

# PostgreSQL text cannot hold NUL; SQLite and MemClaw's wire can. Every string crossing the
# driver (parameters and text results alike, so comparisons agree) is escaped reversibly:
# NUL -> ESC "0", ESC -> ESC ESC, with ESC a private-use character.
ESC = "\ue000"
_UNESCAPE = re.compile("\ue000(.)", re.DOTALL)


def escape_nul(text: str) -> str:
    if "\x00" not in text and ESC not in text:
        return text
    return text.replace(ESC, ESC + ESC).replace("\x00", ESC + "0")


def unescape_nul(text: str) -> str:
    if ESC not in text:
        return text
    return _UNESCAPE.sub(lambda m: "\x00" if m.group(1) == "0" else m.group(1), text)


class _NulSafeStrDumper(StrDumperUnknown):
    def dump(self, obj: str) -> bytes | bytearray | memoryview:
        return super().dump(escape_nul(obj))


class _NulSafeStrBinaryDumper(StrBinaryDumper):
    def dump(self, obj: str) -> bytes | bytearray | memoryview:
        return super().dump(escape_nul(obj))


class _NulSafeTextLoader(TextLoader):
    def load(self, data: Buffer) -> str:
        return unescape_nul(super().load(data))


class _NulSafeTextBinaryLoader(TextBinaryLoader):
    def load(self, data: Buffer) -> str:
        return unescape_nul(super().load(data))


def register_codecs(conn: psycopg.Connection) -> None:
    """NUL-safe text and pgvector's type, on every pooled connection."""
    conn.adapters.register_dumper(str, _NulSafeStrDumper)
    conn.adapters.register_dumper(str, _NulSafeStrBinaryDumper)
    conn.adapters.register_loader("text", _NulSafeTextLoader)
    conn.adapters.register_loader("text", _NulSafeTextBinaryLoader)
    register_vector(conn)


class RawVectorLoader(Loader):
    """A `vector` in binary as its bytes (int16 dim, int16 unused, dim big-endian float32):
    a block of them becomes one matrix (`matrix`) without an object per row."""

    format = Format.BINARY

    def load(self, data: Buffer) -> bytes:
        return bytes(data)


def matrix(blobs: Sequence[bytes], dim: int) -> np.ndarray:
    if not blobs:
        return np.zeros((0, dim), dtype=np.float32)
    raw = np.frombuffer(b"".join(blobs), dtype=np.uint8).reshape(len(blobs), 4 + 4 * dim)
    return raw[:, 4:].copy().view(">f4").astype(np.float32)
