"""The file layout of an exported library, and its check before anything loads it.

A library written by ``export_library`` is the shared object the C compiler linked, with the
program's metadata (UTF-8 JSON) and a fixed-size trailer appended to it. The dynamic loader maps
only what the ELF headers describe, so the appended bytes do not change what ``dlopen`` sees::

    offset 0                      the shared object (ELF)          library_size bytes
    offset library_size           the metadata (JSON, UTF-8)       metadata_size bytes
    offset file_size - 96         the trailer                      96 bytes

    the trailer (integers little-endian):
      0   8  magic            b"TVMSLIB\\0"
      8   4  version          1
     12   4  trailer size     96
     16   8  library_size
     24   8  metadata_size
     32  32  SHA-256 of the shared object's bytes
     64  32  SHA-256 of the metadata's bytes

``verify_library`` reads the trailer, requires ``library_size + metadata_size + 96`` to be the
file's size exactly (so no size read from the file can point past its end), and checks both
hashes before the caller hands the file to ``dlopen``: a truncated copy, a flipped byte anywhere
(code, metadata or trailer) or a file that is not a tvms library is a one-line ``TVMSError``
instead of a SIGBUS or SIGSEGV inside the loader. The hashes detect damage, not tampering:
whoever can write a library file can write code, and loading a library runs its code.
"""
from __future__ import annotations

import hashlib
import os
import struct

from tvms.ir.errors import TVMSError

MAGIC = b"TVMSLIB\0"
TRAILER_VERSION = 1
_TRAILER = struct.Struct("<8sIIQQ32s32s")
TRAILER_SIZE = _TRAILER.size  # 96
_ELF_MAGIC = b"\x7fELF"
_CHUNK = 1 << 20


def append_trailer(path: str, metadata: bytes) -> None:
    """Append ``metadata`` and the trailer to the shared object just linked at ``path``."""
    with open(path, "rb") as f:
        library_hash, library_size = _hash_range(f, 0, os.fstat(f.fileno()).st_size)
    trailer = _TRAILER.pack(MAGIC, TRAILER_VERSION, TRAILER_SIZE, library_size, len(metadata),
                            library_hash, hashlib.sha256(metadata).digest())
    with open(path, "ab") as f:
        f.write(metadata + trailer)


def verify_library(path: str) -> bytes:
    """The metadata bytes of the library at ``path``, once its sizes and hashes are checked;
    a ``TVMSError`` naming the file and the damage otherwise."""
    def refuse(why: str) -> TVMSError:
        return TVMSError(f"load_module: {path} {why}")

    if os.path.isdir(path):
        raise refuse("is a directory, not a tvms library")
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        raise refuse("does not exist") from None
    except OSError as err:
        raise refuse(f"cannot be read: {err.strerror or err}") from None
    with f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            raise refuse("is empty, not a tvms library")
        if size < TRAILER_SIZE + len(_ELF_MAGIC):
            raise refuse(f"is not a tvms library ({size} bytes, shorter than the tvms trailer)")
        f.seek(size - TRAILER_SIZE)
        magic, version, trailer_size, library_size, metadata_size, library_hash, metadata_hash = (
            _TRAILER.unpack(f.read(TRAILER_SIZE)))
        if magic != MAGIC:
            raise refuse("is not a tvms library, or it is truncated (it does not end with the tvms trailer)")
        if version != TRAILER_VERSION or trailer_size != TRAILER_SIZE:
            raise refuse(f"has a tvms trailer of version {version} ({trailer_size} bytes); this tvms "
                         f"reads version {TRAILER_VERSION} ({TRAILER_SIZE} bytes)")
        if library_size + metadata_size + TRAILER_SIZE != size:
            raise refuse(f"is damaged: its trailer describes {library_size} + {metadata_size} + "
                         f"{TRAILER_SIZE} bytes, the file has {size}")
        f.seek(0)
        if f.read(len(_ELF_MAGIC)) != _ELF_MAGIC:
            raise refuse("is damaged: the shared object does not start with the ELF magic")
        if _hash_range(f, 0, library_size)[0] != library_hash:
            raise refuse("is damaged: the checksum of its code does not match (a changed byte)")
        metadata = f.read(metadata_size)
        if hashlib.sha256(metadata).digest() != metadata_hash:
            raise refuse("is damaged: the checksum of its metadata does not match (a changed byte)")
    return metadata


def _hash_range(f, start: int, length: int) -> tuple[bytes, int]:
    """SHA-256 of ``length`` bytes of ``f`` from ``start`` (read in chunks), and the length read."""
    f.seek(start)
    digest, left = hashlib.sha256(), length
    while left > 0:
        chunk = f.read(min(_CHUNK, left))
        if not chunk:
            break
        digest.update(chunk)
        left -= len(chunk)
    return digest.digest(), length - left
