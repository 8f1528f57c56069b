"""The results file: CSV, one row per finished point, appended and synced as each finishes.

Resume: opening an existing file reads the ids of the points already in it (the sweep skips
them). A row cut off by a kill (no final newline) is dropped first, so its point reruns. A
file whose header differs belongs to another sweep, and one whose rows carry another
fingerprint was computed from another base scenario or moesim build
(:mod:`moesim.sweep.fingerprint`): both are refused, not mixed.
Parquet (``<results>.parquet``) is written from the CSV at the end when pyarrow is installed.
"""

from __future__ import annotations

import contextlib
import csv
import os
from pathlib import Path
from typing import IO

from moesim.errors import ConfigError
from moesim.io import atomic_target, short
from moesim.sweep.fingerprint import FINGERPRINT_COLUMN
from moesim.sweep.lock import results_lock
from moesim.sweep.row import ID_COLUMN


class ResultStore:
    """Append-only CSV results of one sweep; use as a context manager."""

    def __init__(self, path: str | Path, columns: list[str], fingerprint: str = "") -> None:
        self.path = Path(path)
        self.columns = list(columns)
        self.fingerprint = fingerprint  # stamped on every row written
        self._file: IO[str] | None = None
        self._writer: csv.DictWriter[str] | None = None
        self._lock: contextlib.ExitStack | None = None
        self._ids: set[str] = set()
        self._size = 0  # bytes of the file as this store last left it

    def __enter__(self) -> ResultStore:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.ExitStack() as stack:
            stack.enter_context(results_lock(self.path))
            self._open()
            self._lock = stack.pop_all()
        return self

    def _open(self) -> None:
        if self.path.exists():
            _drop_partial_line(self.path)
        fresh = not self.path.exists() or self.path.stat().st_size == 0
        if not fresh:
            self._check_header()
            self._check_fingerprint()
        self._file = self.path.open("a", newline="")
        self._writer = csv.DictWriter(self._file, fieldnames=self.columns)
        if fresh:
            self._writer.writeheader()
            self._sync()
        self._ids = {row[ID_COLUMN] for row in read_rows(self.path)}
        self._size = self._file.tell()

    def __exit__(self, *exc: object) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    def done_ids(self) -> set[str]:
        """Ids of the points already recorded (finished or failed)."""
        return set(self._ids) if self._file is not None else {
            row[ID_COLUMN] for row in read_rows(self.path)}

    def append(self, row: dict[str, str]) -> bool:
        """Write one row and push it to disk before returning (flush + fsync).

        The row must carry this file's fingerprint (or none); rows another writer added
        since the last append are checked first (the lock should make that impossible, but
        a lock cannot be seen across every network file system). A point already in the
        file is not written twice: returns False.
        """
        if self._writer is None or self._file is None:
            raise RuntimeError("ResultStore.append outside 'with'")
        stamped = row.get(FINGERPRINT_COLUMN, "")
        if stamped and stamped != self.fingerprint:
            raise ConfigError(str(self.path), f"a row computed from fingerprint {short(stamped)} "
                              f"cannot join results of {self.fingerprint}")
        self._check_foreign_rows()
        if row.get(ID_COLUMN) in self._ids:
            return False
        cells = {c: row.get(c, "") for c in self.columns}
        if FINGERPRINT_COLUMN in cells:
            cells[FINGERPRINT_COLUMN] = self.fingerprint
        self._writer.writerow(cells)
        self._sync()
        self._ids.add(cells.get(ID_COLUMN, ""))
        self._size = self._file.tell()
        return True

    def _check_foreign_rows(self) -> None:
        """Rows that another writer appended since this store's last write: same sweep only."""
        assert self._file is not None
        if os.fstat(self._file.fileno()).st_size == self._size:
            return
        rows = read_rows(self.path)
        if FINGERPRINT_COLUMN in self.columns:
            other = {r.get(FINGERPRINT_COLUMN, "") for r in rows} - {self.fingerprint}
            if other:
                raise ConfigError(str(self.path), "another writer added rows of fingerprint "
                                  f"{', '.join(sorted(other))} during this sweep; stopped")
        self._ids = {r[ID_COLUMN] for r in rows}
        self._file.seek(0, os.SEEK_END)
        self._size = self._file.tell()

    def _sync(self) -> None:
        assert self._file is not None
        self._file.flush()
        os.fsync(self._file.fileno())

    def _check_header(self) -> None:
        with self.path.open(newline="") as f:
            header = next(csv.reader(f), [])
        if header != self.columns:
            raise ConfigError(
                str(self.path),
                "holds results of a different sweep (its columns differ); give another --out",
            )


    def _check_fingerprint(self) -> None:
        if FINGERPRINT_COLUMN not in self.columns:
            return
        other = stale_fingerprints(self.path, self.fingerprint)
        if other:
            raise ConfigError(
                str(self.path),
                f"holds results computed from another base scenario or moesim build "
                f"(fingerprint {', '.join(sorted(other))}, now {self.fingerprint}); "
                "give another --out or delete the file",
            )


def stale_fingerprints(path: str | Path, fingerprint: str) -> set[str]:
    """The fingerprints other than ``fingerprint`` that rows of ``path`` carry."""
    return {row.get(FINGERPRINT_COLUMN, "") for row in read_rows(path)} - {fingerprint}


def read_rows(path: str | Path) -> list[dict[str, str]]:
    """The complete rows of a results CSV (a cut-off last row is ignored)."""
    path = Path(path)
    if not path.exists():
        return []
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        width = len(reader.fieldnames or [])
        return [row for row in reader if len(row) == width and None not in row.values()]


def write_parquet(csv_path: str | Path) -> Path | None:
    """``<results>.parquet`` beside the CSV when pyarrow is installed, else None."""
    try:
        import pyarrow.csv as pacsv
        import pyarrow.parquet as pq
    except ImportError:
        return None
    csv_path = Path(csv_path)
    out = csv_path.with_suffix(".parquet")
    with atomic_target(out) as tmp:
        pq.write_table(pacsv.read_csv(csv_path), tmp)
    return out


def _drop_partial_line(path: Path) -> None:
    """Truncate a row that a kill cut off mid-write (the file does not end in a newline)."""
    with path.open("rb+") as f:
        data = f.read()
        if data.endswith(b"\n"):
            return
        f.truncate(data.rfind(b"\n") + 1)
