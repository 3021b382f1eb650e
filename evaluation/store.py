"""The result store of an evaluation directory: resumable, crash-safe, append-only JSONL.

Layout of ``DIR``::

    manifest.json        the run's parameters (see :mod:`harnessgrid.evaluation.manifest`)
    trajectories.jsonl   every finished trajectory, in full (core's TrajectoryStore format)
    results.jsonl        one small EvalResult per trajectory: the commit record reports read
    .lock                held while an evaluation writes, so two never write one DIR

**Why JSONL and not SQLite.** Trajectories are nested documents (turns, messages, token
records) that pydantic already serialises to one JSON line, and core's ``TrajectoryStore``
appends such a line with one ``O_APPEND`` write plus ``fsync``: with a single writer (the lock)
that is as durable as a SQLite commit, and the files stay readable by the tools that read every
other trajectory file of the project (``hg.TrajectoryStore(path).load()``, ``jq``, ``grep``,
the trainer's SFT loader) and can be copied or concatenated without a schema. SQLite would add a
second format and a schema to migrate, for queries the reports do in memory anyway. What JSONL lacks —
cheap reading of big runs — comes from the split into two files: reports read only the small
``results.jsonl``; each result records the byte offset of its trajectory for random access.

**Crash safety.** An episode is committed in two appends: its trajectory, then its result.
After a crash, at most the last line of each file is torn: :meth:`EvalStore.open` moves torn
bytes to ``<file>.torn`` and truncates to the last whole line. A trajectory written without its
result (killed between the two appends) still carries its key in ``meta["eval"]``, so its
result is rebuilt from it instead of re-running the episode — nothing is lost and nothing is
stored twice.

**Lost trajectories.** ``trajectories.jsonl`` can also lose its tail to something other than a
killed writer (a full disk, a copy, a sync tool), or a results line can point past the end of
the file: a result is then stored without its trajectory. So :meth:`EvalStore.open` reads back
the trajectory of every effective result (one line each, at its offset: no other line is
parsed) and, for each that is missing, cut or another episode's, appends a *loss record* (an
infrastructure failure of termination ``trajectory_lost``, saying why) that supersedes the
result: the episode runs again on resume, ``--keep-failures`` or not, and its old result stays
in the file. The record is written before anything else is appended, since new trajectories
may later fill the offset the lost one had.

**One effective result per key.** Re-running the same command skips stored keys, except those
whose result is an infrastructure failure (policy, sandbox or internal error: a missing key, an
API outage), which are run again unless ``keep_failures``. Nothing is ever rewritten: the new
trajectory and result are appended, and the rule for reading is that *a later result for a key
supersedes an earlier infrastructure failure of that key*, and a loss record the result it
was written for (and nothing else: a second result after a real one can only come from files
copied together by hand; it is reported and ignored). Reports read only the effective results
(:func:`read_results`); the superseded ones stay in the files for the audit trail
(:func:`read_superseded`, :func:`read_history`).
"""

from __future__ import annotations

import fcntl
import os
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO, Self

from harnessgrid.errors import ConfigError
from harnessgrid.evaluation.results import META_KEY, EvalResult, ResultKey
from harnessgrid.models import clean_text
from harnessgrid.paths import require_output_dir
from harnessgrid.trajectory import Trajectory, TrajectoryStore, read_trajectory_line

RESULTS = "results.jsonl"
TRAJECTORIES = "trajectories.jsonl"
LOCK = ".lock"


def append_line(path: Path, line: bytes) -> None:
    """Append one whole line with a single write and fsync it (what TrajectoryStore does)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)


def repair_tail(path: Path) -> int:
    """Cut a torn last line (no trailing newline) off ``path``; keep its bytes in
    ``<path>.torn`` for inspection. Returns how many bytes were cut."""
    if not path.exists() or path.stat().st_size == 0:
        return 0
    with path.open("rb+") as f:
        size = f.seek(0, os.SEEK_END)
        f.seek(size - 1)
        if f.read(1) == b"\n":
            return 0
        keep = _after_last_newline(f, size)
        f.seek(keep)
        torn = f.read()
        f.truncate(keep)
        f.flush()
        os.fsync(f.fileno())
    with path.with_name(path.name + ".torn").open("ab") as out:
        out.write(torn + b"\n")
    warnings.warn(f"{path}: cut a torn last line ({len(torn)} bytes, kept in {path.name}.torn) "
                  "left by an interrupted writer", stacklevel=2)
    return len(torn)


def _after_last_newline(f: IO[bytes], size: int, block: int = 1 << 16) -> int:
    end = size
    while end > 0:
        start = max(0, end - block)
        f.seek(start)
        chunk = f.read(end - start)
        i = chunk.rfind(b"\n")
        if i >= 0:
            return start + i + 1
        end = start
    return 0


def _whole_lines(path: Path) -> Iterator[tuple[int, int, bytes]]:
    """(line number, byte offset, line) of every newline-terminated line; a torn last line is
    skipped (a writer may be appending right now)."""
    if not path.exists():
        return
    with path.open("rb") as f:
        offset = 0
        for n, raw in enumerate(f, 1):
            if not raw.endswith(b"\n"):
                return
            if raw.strip():
                yield n, offset, raw
            offset += len(raw)


def supersedes(new: EvalResult, old: EvalResult | None) -> bool:
    """Whether ``new``, stored after ``old`` for the same key, becomes the key's result: an
    infrastructure failure is superseded by a retry of its episode (a loss record is one),
    a result whose trajectory was lost by the loss record of that episode."""
    return old is None or old.infra_failure or (new.trajectory_lost
                                                and new.episode_id == old.episode_id)


@dataclass
class StoredResults:
    """What ``results.jsonl`` holds: the effective result of each key (in order of the key's
    first record), the results later records superseded (in file order), among them
    ``lost_results``, those whose trajectory a loss record says is gone, and how many records
    were ignored as duplicates."""

    effective: dict[ResultKey, EvalResult] = field(default_factory=dict)
    superseded: list[EvalResult] = field(default_factory=list)
    lost_results: list[EvalResult] = field(default_factory=list)
    duplicates: int = 0

    def add(self, result: EvalResult) -> bool:
        """Apply the superseding rule to one more record; False for an ignored duplicate."""
        old = self.effective.get(result.key)
        if not supersedes(result, old):
            self.duplicates += 1
            return False
        if old is not None:
            self.superseded.append(old)
            if result.trajectory_lost and old.traj_offset >= 0:
                self.lost_results.append(old)
        self.effective[result.key] = result
        return True


def scan_results(out_dir: str | Path) -> StoredResults:
    """Every record of ``results.jsonl``, sorted into effective and superseded results."""
    path = Path(out_dir) / RESULTS
    stored = StoredResults()
    for n, _, raw in _whole_lines(path):
        try:
            result = EvalResult.model_validate_json(raw)
        except ValueError as exc:
            raise ConfigError(f"{path}:{n} is not a stored result: {exc}".splitlines()[0],
                              hint="the file was edited or is not an evaluation store") from None
        stored.add(result)
    if stored.duplicates:
        warnings.warn(f"{path}: ignored {stored.duplicates} duplicate result(s) of already "
                      "stored keys", stacklevel=3)
    return stored


def read_results(out_dir: str | Path) -> list[EvalResult]:
    """The effective result of every stored key of ``out_dir``, once per key: a retried
    infrastructure failure is replaced by its retry's result (the failure stays in the file:
    :func:`read_superseded`); a duplicate can only come from copying files together by hand,
    and is reported, not counted twice."""
    return list(scan_results(out_dir).effective.values())


def read_superseded(out_dir: str | Path) -> list[EvalResult]:
    """The results that a later record of the same key replaced, in the order they were
    stored: infrastructure failures (each still points at its trajectory:
    :func:`load_trajectory`), loss records, and results whose trajectory was lost."""
    return scan_results(out_dir).superseded


def read_history(out_dir: str | Path) -> dict[ResultKey, list[EvalResult]]:
    """Every result of every key, oldest first: the superseded failures, then the effective
    result (the last of each list)."""
    stored = scan_results(out_dir)
    history: dict[ResultKey, list[EvalResult]] = {key: [] for key in stored.effective}
    for result in stored.superseded:
        history[result.key].append(result)
    for key, result in stored.effective.items():
        history[key].append(result)
    return history


class TrajectoryMissing(ValueError):
    """A stored result's trajectory is not in ``trajectories.jsonl`` (lost, or never stored)."""


def load_trajectory(out_dir: str | Path, result: EvalResult) -> Trajectory:
    """The full trajectory of one stored result, read at its recorded offset; raises
    :class:`TrajectoryMissing`, saying why, when that is not its trajectory (or none)."""
    path = Path(out_dir) / TRAJECTORIES
    try:
        if result.traj_offset < 0:
            raise TrajectoryMissing(result.error if result.trajectory_lost
                                    else "the result was stored without it")
        with path.open("rb") as f:
            return read_stored_trajectory(f, os.fstat(f.fileno()).st_size, result)
    except (TrajectoryMissing, FileNotFoundError) as exc:
        raise TrajectoryMissing(f"the trajectory of {result.key.describe()} (episode "
                                f"{result.episode_id or '?'}) is not stored: {exc}") from None


def read_stored_trajectory(f: IO[bytes], size: int, result: EvalResult) -> Trajectory:
    """``result``'s trajectory, read from the open ``trajectories.jsonl`` (``size`` bytes) at
    its offset; :class:`TrajectoryMissing` with the reason when the line there is not whole,
    does not read back, or is another episode's (the offset was filled again after a loss)."""
    offset = result.traj_offset
    if offset >= size:
        raise TrajectoryMissing(f"its offset {offset:,} is at or beyond the end of "
                                f"{TRAJECTORIES} ({size:,} bytes)")
    f.seek(max(0, offset - 1))
    if offset > 0 and f.read(1) != b"\n":
        raise TrajectoryMissing(f"its offset {offset:,} in {TRAJECTORIES} is not the start "
                                "of a line")
    raw = f.readline()
    if not raw.endswith(b"\n"):
        raise TrajectoryMissing(f"its line in {TRAJECTORIES} is cut off")
    try:
        traj = Trajectory.model_validate_json(raw)
    except (ValueError, RecursionError) as exc:  # ValidationError included
        first = " ".join(str(exc).splitlines()[:3])[:300]
        raise TrajectoryMissing(f"its line in {TRAJECTORIES} does not read back ({first})"
                                ) from None
    if result.episode_id and traj.episode_id != result.episode_id:
        raise TrajectoryMissing(f"the line at its offset in {TRAJECTORIES} is episode "
                                f"{clean_text(traj.episode_id)[:40]}'s")
    return traj


def lost_trajectories(path: Path, results: Iterable[EvalResult]) -> list[tuple[EvalResult, str]]:
    """Each of ``results`` whose trajectory does not read back from ``path``, with why. Reads
    one line per result (in file order), none other."""
    pointing = sorted((r for r in results if r.traj_offset >= 0), key=lambda r: r.traj_offset)
    if not pointing:
        return []
    if not path.exists():
        return [(r, f"{TRAJECTORIES} does not exist") for r in pointing]
    lost: list[tuple[EvalResult, str]] = []
    with path.open("rb") as f:
        size = os.fstat(f.fileno()).st_size
        for result in pointing:
            try:
                read_stored_trajectory(f, size, result)
            except TrajectoryMissing as exc:
                lost.append((result, str(exc)))
    return lost


class EvalStore:
    """The writer side of an evaluation directory. Use as a context manager::

        with EvalStore(out_dir) as store:   # locks, repairs, recovers
            if key not in store.done:
                store.commit(trajectory)    # trajectory.meta["eval"] holds the key
    """

    def __init__(self, out_dir: str | Path) -> None:
        self.dir = Path(out_dir)
        self.results_path = self.dir / RESULTS
        self.trajectories = TrajectoryStore(self.dir / TRAJECTORIES)
        self._stored = StoredResults()
        self.recovered = 0
        self._lock: IO[str] | None = None

    @property
    def results(self) -> dict[ResultKey, EvalResult]:
        """The effective result of each stored key (see the module doc)."""
        return self._stored.effective

    @property
    def superseded(self) -> list[EvalResult]:
        """Results superseded by a later record (kept in the files)."""
        return self._stored.superseded

    @property
    def done(self) -> set[ResultKey]:
        """Every key with a stored result (whatever its outcome), but those whose trajectory
        was lost: they run again on resume."""
        return set(self.results) - self.lost

    @property
    def failed(self) -> set[ResultKey]:
        """The keys whose result is an infrastructure failure: re-run on resume unless the
        evaluation keeps failures (a lost trajectory is not one of them: see :attr:`lost`)."""
        return {key for key, result in self.results.items()
                if result.infra_failure and not result.trajectory_lost}

    @property
    def lost(self) -> set[ResultKey]:
        """The keys whose trajectory was lost (found so on this open or an earlier one):
        always run again, ``keep_failures`` or not."""
        return {key for key, result in self.results.items() if result.trajectory_lost}

    def __enter__(self) -> Self:
        self.open()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def open(self) -> None:
        require_output_dir(self.dir, "the evaluation directory").mkdir(parents=True,
                                                                        exist_ok=True)
        self._acquire_lock()
        repair_tail(self.trajectories.path)
        repair_tail(self.results_path)
        self._stored = scan_results(self.dir)
        # Before anything is appended: a new trajectory may take the offset of a lost one.
        self._record_lost_trajectories()
        self._recover_orphans()
        self._say_what_runs_again()

    def close(self) -> None:
        if self._lock is not None:
            fcntl.flock(self._lock, fcntl.LOCK_UN)
            self._lock.close()
            self._lock = None

    def _acquire_lock(self) -> None:
        lock = (self.dir / LOCK).open("a+")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            holder = lock.read().strip() or "another process"
            lock.close()
            raise ConfigError(f"{self.dir} is being written by another evaluation ({holder})",
                              hint="wait for it to finish, or choose another --out DIR") from None
        lock.seek(0)
        lock.truncate()
        lock.write(f"pid {os.getpid()}\n")
        lock.flush()
        self._lock = lock

    def _record_lost_trajectories(self) -> None:
        """Append a loss record for each effective result whose trajectory does not read back
        (see the module doc)."""
        for result, reason in lost_trajectories(self.trajectories.path,
                                                list(self.results.values())):
            self._append_result(result.lost_result(reason))

    def _say_what_runs_again(self) -> None:
        lost = [self.results[key] for key in self.lost]
        if not lost:
            return
        which = "; ".join(f"{r.key.describe()} (episode {r.episode_id or '?'}: "
                          f"{(r.error or '').removeprefix('trajectory lost: ')})"
                          for r in lost[:10])
        more = f"; and {len(lost) - 10} more" if len(lost) > 10 else ""
        warnings.warn(f"{self.dir}: re-running {len(lost)} episode(s) whose trajectory was "
                      f"lost: {which}{more}", stacklevel=3)

    def _recover_orphans(self) -> None:
        """Commit results for trajectories stored after the last committed one (a retry of an
        infrastructure failure included: it supersedes the failure, as if committed)."""
        path = self.trajectories.path
        if not path.exists():
            return
        gone = {id(r) for r in self._stored.lost_results}  # offsets pointing at no line of theirs
        last = max((r.traj_offset for r in [*self.results.values(), *self.superseded]
                    if id(r) not in gone), default=-1)
        with path.open("rb") as f:
            if last >= 0:
                f.seek(last)
                f.readline()  # the last committed trajectory itself
            while True:
                offset = f.tell()
                raw = f.readline()
                if not raw:
                    break
                if not raw.strip():
                    continue
                # An unreadable line (stored by an older version) is reported and its episode
                # runs again: resuming never stops on it.
                traj = read_trajectory_line(raw, f"{path}:{offset}")
                if traj is None or META_KEY not in traj.meta:
                    continue
                result = EvalResult.from_trajectory(traj, offset)
                if supersedes(result, self.results.get(result.key)):
                    self._append_result(result)
                    self.recovered += 1

    def commit(self, traj: Trajectory) -> EvalResult:
        """Persist a finished trajectory and its result (in that order; see module doc)."""
        if self._lock is None:
            raise RuntimeError("EvalStore.commit outside `with EvalStore(...)`")
        path = self.trajectories.path
        offset = path.stat().st_size if path.exists() else 0
        self.trajectories.append(traj)
        result = EvalResult.from_trajectory(traj, offset)
        self._append_result(result)
        return result

    def _append_result(self, result: EvalResult) -> None:
        if not supersedes(result, self.results.get(result.key)):
            raise RuntimeError(f"result already stored: {result.key.describe()}")
        append_line(self.results_path, (result.model_dump_json() + "\n").encode())
        self._stored.add(result)

    def extend(self, results: Iterable[EvalResult]) -> None:
        """Store results without trajectories (imports, tests of the reports)."""
        for result in results:
            self._append_result(result)
