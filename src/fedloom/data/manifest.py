"""Dataset files checked against ``MANIFEST.tsv`` in the data folder (``path  bytes  sha256  rows``):
a truncated, replaced or corrupted file is refused by name. Sizes are compared on every load; a
file's sha256 once per (size, mtime, ctime, inode), remembered in ``$FEDLOOM_CACHE/data/verified.json``."""

from __future__ import annotations

import contextlib
import hashlib
import json
from pathlib import Path

from fedloom.errors import DataError
from fedloom.paths import atomic_write, cache_root

MANIFEST = "MANIFEST.tsv"
FIX = "restore the file, or update its MANIFEST.tsv line if the change is intended"


def verify_folder(root: Path, folder: str) -> None:
    """Check every file of ``root/folder`` that the manifest lists and that exists (a missing file is
    the loader's to report); nothing to check without a manifest."""
    manifest = root / MANIFEST
    if not manifest.is_file():
        return
    verified = _load_verified()
    seen = dict(verified)
    for rel, (size, digest) in read_manifest(manifest).items():
        path = root / rel
        if not rel.startswith(f"{folder.strip('/')}/") or not path.is_file():
            continue
        stat = path.stat()
        if stat.st_size != size:
            raise DataError(f"{path} has {stat.st_size} bytes but {manifest} lists {size} (cut short?); {FIX}")
        # ctime and inode too: an edit with its mtime put back (os.utime) still changes the ctime
        key, stamp = str(path.resolve()), [stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino, digest]
        if verified.get(key) == stamp:
            continue
        with path.open("rb") as f:
            if hashlib.file_digest(f, "sha256").hexdigest() != digest:
                raise DataError(f"{path} does not match its sha256 in {manifest} (corrupted?); {FIX}")
        verified[key] = stamp
    if verified != seen:
        _save_verified(verified)


def read_manifest(path: Path) -> dict[str, tuple[int, str]]:
    """Relative path → (bytes, sha256) of every line below the header."""
    entries = {}
    for number, line in enumerate(path.read_text().splitlines()[1:], start=2):
        fields = line.split("\t")
        if not line.strip():
            continue
        if len(fields) < 3 or not fields[1].isdigit() or len(fields[2]) != 64:
            raise DataError(f"{path}: line {number} is not 'path<TAB>bytes<TAB>sha256[<TAB>rows]': {line[:80]!r}")
        entries[fields[0]] = (int(fields[1]), fields[2].lower())
    return entries


def _verified_file() -> Path:
    return cache_root() / "data" / "verified.json"


def _load_verified() -> dict[str, list[object]]:
    try:
        value = json.loads(_verified_file().read_text())
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _save_verified(verified: dict[str, list[object]]) -> None:
    path = _verified_file()
    with contextlib.suppress(OSError):  # a read-only cache only means hashing again next time
        atomic_write(path, json.dumps(verified))
