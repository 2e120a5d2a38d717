"""The on-disk cache of compiled kernels, so a new process rebuilding an unchanged kernel skips
LLVM IR generation, the O3 optimization and machine code generation.

An entry holds a kernel's LLVM IR, its optimized IR (export and ``get_source`` read it) and its
object code (what the runtime's JIT loads), under ``$TVMS_CACHE_DIR`` (default ``~/.cache/tvms``; set it empty
to turn the cache off). The key covers everything the code depends on: the in-process content
key (the lowered function's text, the target, its CPU and features, the thread pool), the entry
symbol, the llvmlite and LLVM versions, and the source of this codegen package (code generated
by another version of tvms is never loaded). Entries are written to a temporary file and renamed,
so readers see whole entries only; one that fails its checksum is ignored and rebuilt. The folder
is kept under ``$TVMS_CACHE_MAX_MB`` (default 1024): now and then a write removes the entries
used least recently (a hit refreshes an entry's time) until it is under 80% of that.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .llvm_target import require_llvm

_MAGIC = b"TVMSOBJ1\n"
_PRUNE_EVERY = 32  # writes between two looks at the folder's size (listing it costs a little)
STATS = {"hits": 0, "misses": 0, "writes": 0, "corrupt": 0}  # for tests and benchmarks
_codegen_digest: str | None = None


@dataclass(frozen=True)
class CachedKernel:
    llvm_ir: str
    optimized_ir: str
    object_code: bytes


def cache_dir() -> Path | None:
    """Where entries live; None when ``TVMS_CACHE_DIR`` is set empty (the cache is off)."""
    configured = os.environ.get("TVMS_CACHE_DIR")
    if configured is None:
        return Path.home() / ".cache" / "tvms" / "kernels"
    return Path(configured) / "kernels" if configured.strip() else None


def disk_key(content_key: str, symbol: str) -> str:
    import llvmlite

    llvm_version = ".".join(map(str, require_llvm().llvm_version_info))
    parts = [content_key, symbol, llvmlite.__version__, llvm_version, _source_digest()]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _source_digest() -> str:
    """A hash of this package's source: a change to the code generator changes every key."""
    global _codegen_digest
    if _codegen_digest is None:
        digest = hashlib.sha256()
        for path in sorted(Path(__file__).parent.glob("*.py")):
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
        _codegen_digest = digest.hexdigest()
    return _codegen_digest


def load(key: str) -> CachedKernel | None:
    """The entry of ``key``, or None when there is none or it is damaged."""
    folder = cache_dir()
    if folder is None:
        return None
    try:
        data = (folder / f"{key}.bin").read_bytes()
    except OSError:
        STATS["misses"] += 1
        return None
    entry = _decode(data)
    if entry is None:
        STATS["corrupt"] += 1
        return None
    STATS["hits"] += 1
    try:
        os.utime(folder / f"{key}.bin")  # (recently used: pruned last)
    except OSError:
        pass
    return entry


def _decode(data: bytes) -> CachedKernel | None:
    if not data.startswith(_MAGIC):
        return None
    header_end = data.find(b"\n", len(_MAGIC))
    if header_end < 0:
        return None
    try:
        header = json.loads(data[len(_MAGIC):header_end])
        sizes = [int(n) for n in header["sizes"]]
        expected = str(header["sha256"])
    except (ValueError, KeyError, TypeError):
        return None
    payload = data[header_end + 1:]
    if len(sizes) != 3 or sum(sizes) != len(payload) \
            or hashlib.sha256(payload).hexdigest() != expected:
        return None
    ir_end, opt_end = sizes[0], sizes[0] + sizes[1]
    try:
        return CachedKernel(payload[:ir_end].decode(), payload[ir_end:opt_end].decode(), payload[opt_end:])
    except UnicodeDecodeError:
        return None


def store(key: str, entry: CachedKernel) -> None:
    """Write ``entry`` atomically; a cache that cannot be written is skipped, not an error."""
    folder = cache_dir()
    if folder is None:
        return
    parts = [entry.llvm_ir.encode(), entry.optimized_ir.encode(), entry.object_code]
    payload = b"".join(parts)
    header = json.dumps({"sizes": [len(p) for p in parts], "sha256": hashlib.sha256(payload).hexdigest()})
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, temp = tempfile.mkstemp(dir=folder, prefix=f".{key}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(_MAGIC + header.encode() + b"\n" + payload)
            os.replace(temp, folder / f"{key}.bin")
        except BaseException:
            os.unlink(temp)
            raise
    except OSError:
        return
    STATS["writes"] += 1
    if STATS["writes"] % _PRUNE_EVERY == 1:
        prune(folder, int(os.environ.get("TVMS_CACHE_MAX_MB", "1024")) << 20)


def prune(folder: Path, max_bytes: int) -> None:
    """Remove the least recently used entries of ``folder`` while it holds more than
    ``max_bytes``, down to 80% of it."""
    try:
        entries = [(stat.st_mtime, stat.st_size, path)
                   for path, stat in ((p, p.stat()) for p in folder.glob("*.bin"))]
    except OSError:  # (an entry another process removed meanwhile: look again next time)
        return
    total = sum(size for _, size, _ in entries)
    if total <= max_bytes:
        return
    for _, size, path in sorted(entries, key=lambda entry: entry[0]):
        if total <= max_bytes * 0.8:
            break
        try:
            path.unlink()
            total -= size
        except OSError:
            pass


__all__ = ["CachedKernel", "STATS", "cache_dir", "disk_key", "load", "prune", "store"]
