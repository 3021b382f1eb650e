"""Handing a user's directory back (``in_place``, as root) never grants privilege.

The sandbox lends every entry of the directory to its uid; at close, owners and modes come
back from a journal. The attacks here are the ones an agent can run on that hand-back: rewrite
a root-owned set-uid program in place, or delete it and let a file of its own take the freed
inode number. Both run through a real bubblewrap sandbox; a property test then drives 1,000
random sequences of what an unprivileged agent can do (create, rewrite, append, delete, rename,
hard-link, chmod, mkdir, symlink, inode reuse) - each in a forked process that has dropped to an
unprivileged uid, as the sandbox's commands are - over set-id files of several owners, through
the real ``Workspace.assign_owner`` / ``release_owner``, and checks what is left.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from harnessgrid.sandboxing.sandbox import Sandbox, check_bwrap, sandbox_available
from harnessgrid.sandboxing.workspace import Workspace
from harnessgrid.sandboxing.workspace_owners import record_owners, restore_owners, seal_owners

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="lending a directory's entries "
                                "to another uid needs root")
needs_sandbox = pytest.mark.skipif(not sandbox_available(), reason=f"no sandbox: {check_bwrap()}")

USER = 1000  # the directory's owner, as a product's user
OTHER = 1001  # another local user with files in it
AGENT = 2_999_999_001  # the uid the property test's "agent" processes drop to
SET_ID = stat.S_ISUID | stat.S_ISGID
ID = shutil.which("id") or "/usr/bin/id"


def _project_with_root_helper(top: Path) -> Path:
    """A user's directory holding ``helper``: a root-owned set-uid copy of ``id``."""
    project = top / "project"
    (project / "sub").mkdir(parents=True)
    shutil.copy(ID, project / "helper")
    os.chown(project, USER, USER)
    os.chown(project / "sub", USER, USER)
    os.chmod(project / "helper", 0o4755)
    return project


def _privileged(project: Path) -> list[str]:
    """Entries that could lend someone else's rights: set-id files, or a foreign owner."""
    found = []
    for path in [project, *project.rglob("*")]:
        st = path.lstat()
        set_id = st.st_mode & (stat.S_ISUID if stat.S_ISDIR(st.st_mode) else SET_ID)
        if set_id or (st.st_uid, st.st_gid) != (USER, USER):
            found.append(f"{path.relative_to(project)} {stat.filemode(st.st_mode)} "
                         f"{st.st_uid}:{st.st_gid}")
    return found


def _run_as_user(program: Path) -> str:
    return subprocess.run(["setpriv", f"--reuid={USER}", f"--regid={USER}", "--clear-groups",
                           str(program)], capture_output=True, text=True, check=False).stdout


@needs_sandbox
def test_an_agent_rewriting_a_root_set_uid_file_gets_no_set_uid_program(tmp_path: Path) -> None:
    """Issue 38, finding 1: the agent's bytes in ``helper`` came back root-owned and set-uid."""
    project = _project_with_root_helper(tmp_path)
    with Workspace.open(project, in_place=True) as ws, Sandbox(ws) as sandbox:
        assert sandbox.run_sync(f"cat {ID} > helper; printf AGENT-BYTES >> helper").ok
    helper = project / "helper"
    assert helper.read_bytes().endswith(b"AGENT-BYTES")
    st = helper.lstat()
    assert (st.st_uid, st.st_gid, st.st_mode & SET_ID) == (USER, USER, 0), _privileged(project)
    assert _privileged(project) == []
    if shutil.which("setpriv"):
        assert "euid=0" not in _run_as_user(helper)


@needs_sandbox
def test_a_new_file_on_a_deleted_set_uid_files_inode_inherits_nothing(tmp_path: Path) -> None:
    """Issue 38, finding 2: the journal was keyed by inode number alone, so a copy of ``id``
    that took the deleted helper's inode came back root-owned and set-uid at any name."""
    project = _project_with_root_helper(tmp_path)
    freed = (project / "helper").stat().st_ino
    reuse = (f"ino=$(stat -c %i helper); rm helper; for i in $(seq 1 50); do cp {ID} c$i; "
             f'if [ "$(stat -c %i c$i)" = "$ino" ]; then mv c$i sub/.not-helper; break; fi; '
             "done; rm -f c*")
    with Workspace.open(project, in_place=True) as ws, Sandbox(ws) as sandbox:
        assert sandbox.run_sync(reuse).ok
    assert _privileged(project) == []
    copy = project / "sub" / ".not-helper"
    if copy.exists():  # ext4 and most disk filesystems hand the inode out again at once
        assert copy.stat().st_ino == freed
        if shutil.which("setpriv"):
            assert "euid=0" not in _run_as_user(copy)


def test_the_journal_restores_nothing_for_a_new_file_on_a_recorded_inode(tmp_path: Path) -> None:
    """Inode reuse made certain: the journal is edited so that the agent's new file's inode
    is the one recorded for a root set-uid file (what a filesystem does when it reuses the
    number), with the original's recorded bytes."""
    project = _project_with_root_helper(tmp_path)
    journal = tmp_path / "journal.json"
    record_owners(project, journal)
    _chown_tree(project, AGENT)
    seal_owners(project, journal)
    record = json.loads(journal.read_text())
    (_helper_ino, was), = record["entries"].items()
    assert was[:3] == [0, 0, 0o4755]
    (project / "helper").unlink()
    shutil.copy(ID, project / "sub" / "fresh")  # the same bytes as the original, even
    os.chown(project / "sub" / "fresh", AGENT, AGENT)
    record["entries"] = {str((project / "sub" / "fresh").stat().st_ino): was}
    journal.write_text(json.dumps(record))
    restore_owners(journal)
    assert _privileged(project) == []


def test_an_untouched_set_uid_file_and_foreign_owners_are_handed_back_exactly(
        tmp_path: Path) -> None:
    project = _project_with_root_helper(tmp_path)
    (project / "theirs.txt").write_text("other user's\n")
    os.chown(project / "theirs.txt", OTHER, OTHER)
    os.chmod(project, 0o750)
    before = _state(project)
    journal = tmp_path / "journal.json"
    with Workspace.open(project, in_place=True) as ws:
        ws.assign_owner(AGENT, AGENT, journal=journal)
        assert (project / "helper").stat().st_uid == AGENT
        os.chmod(project, 0o777)  # the agent opened up the top folder: it is put back
        ws.release_owner(USER, USER)
    assert _state(project) == before
    assert not journal.exists()


def test_an_unsealed_journal_hands_every_entry_to_the_directorys_owner(tmp_path: Path) -> None:
    """The process died between the chown walk and the seal: nothing can be proven untouched,
    so nothing gets a foreign owner or a set-id bit back - only the directory itself."""
    project = _project_with_root_helper(tmp_path)
    journal = tmp_path / "journal.json"
    record_owners(project, journal)
    _chown_tree(project, AGENT)
    assert restore_owners(journal) == project
    assert _privileged(project) == []
    assert project.stat().st_uid == USER


# ---------------------------------------------------------------------------- property test

SEQUENCES = 1000
OWNERS = [(USER, USER), (0, 0), (OTHER, OTHER), (USER, 0), (OTHER, USER)]
MODES = [0o644, 0o755, 0o4755, 0o2755, 0o6755, 0o4711, 0o2775, 0o600]
OPS = ["rewrite", "append", "truncate", "create", "copy", "delete", "reuse", "rename",
       "link", "chmod", "mkdir", "symlink", "rmdir"]


@dataclass(frozen=True)
class Entry:
    kind: int
    ino: int
    uid: int
    gid: int
    mode: int
    data: bytes | None


def _state(project: Path) -> dict[str, Entry]:
    out = {}
    for path in [project, *project.rglob("*")]:
        st = path.lstat()
        data = path.read_bytes() if stat.S_ISREG(st.st_mode) else None
        out[str(path.relative_to(project))] = Entry(stat.S_IFMT(st.st_mode), st.st_ino,
                                                    st.st_uid, st.st_gid,
                                                    stat.S_IMODE(st.st_mode), data)
    return out


def _chown_tree(project: Path, uid: int) -> None:
    for path in [project, *project.rglob("*")]:
        os.chown(path, uid, uid, follow_symlinks=False)


def _seed_tree(project: Path, rng: random.Random) -> list[str]:
    """Files and folders of several owners and modes, set-id ones among them; a hard link and a
    symlink. Returns the relative paths of the regular files."""
    project.mkdir()
    files = []
    for index in range(rng.randint(2, 5)):
        folder = rng.choice(["", "d/"]) if index else ""
        if folder:
            (project / "d").mkdir(exist_ok=True)
        name = f"{folder}f{index}"
        (project / name).write_bytes(rng.randbytes(rng.randint(0, 64)))
        os.chown(project / name, *rng.choice(OWNERS))
        os.chmod(project / name, rng.choice(MODES))
        files.append(name)
    if (project / "d").exists():
        os.chown(project / "d", *rng.choice(OWNERS))
        os.chmod(project / "d", rng.choice([0o755, 0o2775, 0o777]))
    if rng.random() < 0.5:
        os.link(project / files[0], project / "hard")
        files.append("hard")
    (project / "ln").symlink_to(files[-1])
    os.chown(project / "ln", *rng.choice(OWNERS), follow_symlinks=False)
    os.chown(project, USER, USER)
    return files


def _plan(rng: random.Random, files: list[str]) -> list[tuple[str, str, str, int]]:
    """The agent's moves: (operation, path, second path, a number)."""
    names = [*files, "d", "new", "d/new", "d/e", "x"]
    return [(rng.choice(OPS), rng.choice(names), rng.choice(names), rng.choice([*MODES, 3583]))
            for _ in range(rng.randint(1, 6))]


def _act(project: Path, plan: list[tuple[str, str, str, int]]) -> None:
    """Run in the forked agent: the moves, each allowed to fail as it would for an agent."""
    for op, a, b, number in plan:
        p, q = project / a, project / b
        try:
            if op in ("rewrite", "append", "truncate"):
                flags = {"rewrite": os.O_WRONLY, "append": os.O_WRONLY | os.O_APPEND,
                         "truncate": os.O_WRONLY | os.O_TRUNC}[op]
                fd = os.open(p, flags | os.O_NOFOLLOW)
                os.write(fd, b"AGENT-BYTES")
                os.close(fd)
            elif op == "create":
                p.write_bytes(b"AGENT-NEW")
            elif op == "copy":  # an original's very bytes under another name
                q.write_bytes(p.read_bytes())
            elif op == "delete":
                p.unlink()
            elif op == "reuse":  # free an inode, then make files until one takes its number
                freed = p.lstat().st_ino
                p.unlink()
                for i in range(8):
                    spare = project / f"r{i}"
                    spare.write_bytes(b"AGENT-REUSE")
                    if spare.lstat().st_ino == freed:
                        spare.rename(q)
                        break
            elif op == "rename":
                p.rename(q)
            elif op == "link":
                os.link(p, q)
            elif op == "chmod":
                os.chmod(p, number, follow_symlinks=False)
            elif op == "mkdir":
                p.mkdir()
            elif op == "symlink":
                p.symlink_to(b)
            elif op == "rmdir":
                p.rmdir()
        except (OSError, NotImplementedError):  # chmod of a symlink itself: Linux has none
            pass


def _as_agent(project: Path, plan: list[tuple[str, str, str, int]]) -> None:
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child's exit status carries the outcome
        status = 1
        try:
            os.setgroups([])
            os.setresgid(AGENT, AGENT, AGENT)
            os.setresuid(AGENT, AGENT, AGENT)
            _act(project, plan)
            status = 0
        finally:
            os._exit(status)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def _touched(plan: list[tuple[str, str, str, int]], before: dict[str, Entry]) -> set[str]:
    """Paths an operation could have changed (both operands, their folders, other names of
    the same inode): the property test demands exact hand-back only of the other entries."""
    out = {"."}
    for _, a, b, _ in plan:
        for path in (a, b):
            out |= {path, str(Path(path).parent)}
    inodes = {before[path].ino for path in out if path in before}
    return out | {path for path, entry in before.items() if entry.ino in inodes}


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A folder every uid can traverse (pytest's own are root's, mode 0700), as a user's
    directory is to the sandbox that borrows it."""
    top = Path(tempfile.mkdtemp(prefix="hg-in-place-"))
    top.chmod(0o755)
    yield top
    shutil.rmtree(top)


def test_no_random_agent_sequence_leaves_a_privileged_file(open_dir: Path) -> None:
    """For every sequence: no entry but an untouched original is set-id or foreign-owned, and
    every entry no move named keeps its inode, owner, mode and bytes."""
    tmp_path = open_dir
    journal = tmp_path / "journal.json"
    reused = changed = 0
    for seq in range(SEQUENCES):
        rng = random.Random(seq)
        project = tmp_path / f"s{seq}"
        files = _seed_tree(project, rng)
        before = _state(project)
        plan = _plan(rng, files)
        with Workspace.open(project, in_place=True) as ws:
            ws.assign_owner(AGENT, AGENT, journal=journal)
            _as_agent(project, plan)
            ws.release_owner(USER, USER)
        after = _state(project)
        where = f"sequence {seq}: plan {plan}"
        assert after["."] == before["."], where
        touched = _touched(plan, before)
        for path, entry in after.items():
            original = before.get(path)
            if path not in touched and original is not None:
                assert entry == original, f"{where}: {path} untouched, not kept"
            set_id = entry.mode & (stat.S_ISUID if entry.kind == stat.S_IFDIR else SET_ID)
            if set_id or (entry.uid, entry.gid) != (USER, USER):
                # only an original - its inode, bytes, owner and mode - under any name (a
                # folder of it may have been renamed)
                assert entry in before.values(), f"{where}: {path} {entry} from {original}"
            if entry.data == b"AGENT-REUSE" and entry.ino in {o.ino for o in before.values()}:
                reused += 1  # a new file on a freed original's inode number
        changed += after != before
        shutil.rmtree(project)
    assert changed > SEQUENCES // 2  # the agent's moves did take effect
    assert reused > 0  # the sequences did hand freed inodes to new files
