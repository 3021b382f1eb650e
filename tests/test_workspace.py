"""Workspace: materialisation, path confinement and the file operations tools are built on."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harnessgrid.errors import HarnessgridError
from harnessgrid.sandboxing.workspace import (
    MAX_READ_BYTES,
    PathEscapeError,
    Workspace,
    WorkspaceError,
)


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    files = {
        "README.md": "hello\nworld\n",
        "src/app.py": "def main():\n    return 1\n",
        "src/util.py": "X = 1\nY = 2\nX = 3\n",
        "data/blob.bin": b"\x00\x01\x02binary",
    }
    return Workspace.create(files, base_dir=tmp_path / "base")


# ---------------------------------------------------------------- construction and lifetime


def test_create_materialises_files_and_source_dir(tmp_path: Path) -> None:
    """create() copies a source tree, then writes the mapping on top of it (str as UTF-8)."""
    src = tmp_path / "src"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "a.txt").write_text("from source")
    (src / "keep.txt").write_text("kept")
    with Workspace.create({"pkg/a.txt": "overridden", "new/é.txt": "ü"}, source_dir=src) as ws:
        assert ws.read_text("pkg/a.txt") == "overridden"
        assert ws.read_text("keep.txt") == "kept"
        assert (ws.root / "new" / "é.txt").read_bytes() == "ü".encode()
        root = ws.root
    assert not root.exists(), "cleanup() on exit removes a directory the workspace created"


def test_create_rejects_files_that_escape(tmp_path: Path) -> None:
    """A task's file mapping cannot plant files outside the new workspace."""
    with pytest.raises(PathEscapeError, match=r"\.\./evil"):
        Workspace.create({"../evil": "x"}, base_dir=tmp_path)
    assert not (tmp_path / "evil").exists()
    assert list(tmp_path.iterdir()) == [], "the half-made workspace was cleaned up"


def test_source_symlinks_are_copied_as_links_not_followed(tmp_path: Path) -> None:
    """A link to a host file in the source tree stays a link, and file tools refuse it."""
    src = tmp_path / "src"
    src.mkdir()
    secret = tmp_path / "secret.txt"
    secret.write_text("host secret")
    (src / "leak").symlink_to(secret)
    with Workspace.create(source_dir=src) as ws:
        assert (ws.root / "leak").is_symlink()
        with pytest.raises(PathEscapeError, match="leak"):
            ws.read_text("leak")


def test_open_works_on_a_copy_unless_in_place(tmp_path: Path) -> None:
    """open() protects the user's directory by default; in_place=True edits it for real."""
    user_dir = tmp_path / "project"
    user_dir.mkdir()
    (user_dir / "f.txt").write_text("original")
    copy = Workspace.open(user_dir)
    copy.write_text("f.txt", "changed")
    assert (user_dir / "f.txt").read_text() == "original"
    copy.cleanup()
    assert not copy.root.exists()

    live = Workspace.open(user_dir, in_place=True)
    live.write_text("f.txt", "changed")
    assert (user_dir / "f.txt").read_text() == "changed"
    live.cleanup()
    assert user_dir.exists(), "cleanup() never deletes a directory opened in place"


def test_open_missing_directory_names_it(tmp_path: Path) -> None:
    """A wrong path is reported with the path itself."""
    with pytest.raises(HarnessgridError, match="nope"):
        Workspace.open(tmp_path / "nope")


def test_copy_to_is_an_independent_snapshot(ws: Workspace, tmp_path: Path) -> None:
    """Graders work on a copy: later changes to either side do not leak into the other."""
    snap = ws.copy_to(tmp_path / "snap")
    ws.write_text("README.md", "changed")
    assert snap.read_text("README.md") == "hello\nworld\n"
    assert snap.mount_path == ws.mount_path
    with pytest.raises(HarnessgridError, match="already exists"):
        ws.copy_to(tmp_path / "snap")
    auto = ws.copy_to()
    assert auto.snapshot_files() == ws.snapshot_files()
    snap.cleanup()
    auto.cleanup()
    assert not auto.root.exists()


@pytest.mark.parametrize("bad", ["workspace", "/", "", "/a/../b", "//"])
def test_mount_path_must_be_absolute_below_root(tmp_path: Path, bad: str) -> None:
    """mount_path is where the sandbox shows the workspace: an absolute dir other than '/'."""
    with pytest.raises(HarnessgridError, match="mount_path"):
        Workspace.create(base_dir=tmp_path, mount_path=bad)


# ---------------------------------------------------------------- path confinement


def test_resolve_accepts_relative_mount_and_host_paths(ws: Workspace) -> None:
    """The three spellings of a workspace file all map to the same host path."""
    expected = ws.root / "src" / "app.py"
    assert ws.resolve("src/app.py") == expected
    assert ws.resolve("./src//app.py") == expected
    assert ws.resolve("src/../src/app.py") == expected
    assert ws.resolve("/workspace/src/app.py") == expected
    assert ws.resolve(str(expected)) == expected
    assert ws.resolve(".") == ws.root
    assert ws.resolve("/workspace") == ws.root
    assert ws.sandbox_path("src/app.py") == "/workspace/src/app.py"
    assert ws.sandbox_path(".") == "/workspace"


def test_resolve_with_custom_mount_path(tmp_path: Path) -> None:
    """Tasks may mount the workspace elsewhere; absolute paths follow that mount."""
    ws = Workspace.create({"a": "1"}, base_dir=tmp_path, mount_path="/root/.openclaw/workspace/")
    assert ws.mount_path == "/root/.openclaw/workspace"
    assert ws.resolve("/root/.openclaw/workspace/a") == ws.root / "a"
    with pytest.raises(PathEscapeError):
        ws.resolve("/workspace/a")
    ws.cleanup()


@pytest.mark.parametrize(
    "path",
    [
        "..",
        "../x",
        "src/../../x",
        "/etc/passwd",
        "/workspace/../etc/passwd",
        "/workspacex/a",
        "~",
        "~/.ssh/id_rsa",
        "a\0b",
        "",
    ],
)
def test_resolve_rejects_escapes_and_names_the_path(ws: Workspace, path: str) -> None:
    """'..' above the root, foreign absolute paths, '~', NUL and empty paths are refused."""
    with pytest.raises(PathEscapeError) as info:
        ws.resolve(path)
    if path:
        assert repr(path) in info.value.message
    assert info.value.hint


def test_resolve_rejects_symlinks_leaving_the_workspace(ws: Workspace, tmp_path: Path) -> None:
    """Links anywhere in the chain (dir link, file link, link to link) must stay inside."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("s")
    os.symlink(outside, ws.root / "dirlink")
    os.symlink(outside / "secret", ws.root / "filelink")
    os.symlink("filelink", ws.root / "hop")
    os.symlink("/", ws.root / "rootlink")
    os.symlink(outside / "missing", ws.root / "dangling")
    for path in ["dirlink/secret", "filelink", "hop", "rootlink/etc/passwd", "dangling", "dirlink"]:
        with pytest.raises(PathEscapeError, match="outside the workspace"):
            ws.resolve(path)
    with pytest.raises(PathEscapeError):
        ws.write_text("dangling", "would create a file outside")
    assert not (outside / "missing").exists()


def test_resolve_follows_symlinks_that_stay_inside(ws: Workspace) -> None:
    """Links within the workspace are fine and resolve to their target."""
    os.symlink("src", ws.root / "code")
    os.symlink(ws.root / "README.md", ws.root / "readme")
    assert ws.resolve("code/app.py") == ws.root / "src" / "app.py"
    assert ws.read_text("readme") == "hello\nworld\n"


_PATH_ALPHABET = st.sampled_from(
    ["..", ".", "/", "//", "~", "\0", "a", "src", "é", "ß", "\u202e", "\udcff", " ", "\\", "*"]
)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    parts=st.lists(
        st.one_of(_PATH_ALPHABET, st.text(min_size=1, max_size=8), st.just("/workspace")),
        max_size=8,
    )
)
def test_resolve_never_returns_a_path_outside_root(ws: Workspace, parts: list[str]) -> None:
    """Property: for any string, resolve() raises a HarnessgridError or stays inside root."""
    path = "".join(parts)
    try:
        resolved = ws.resolve(path)
    except HarnessgridError:
        return
    real = os.path.realpath(resolved)
    root = str(ws.root)
    assert real == root or real.startswith(root + os.sep), (path, real)


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(parts=st.lists(st.sampled_from(["..", "link", "in", "a", "."]), min_size=1, max_size=8))
def test_resolve_with_planted_links_stays_inside(tmp_path: Path, parts: list[str]) -> None:
    """Property with a hostile tree (a link to '/' and one inside): still never outside."""
    ws = Workspace.create({"in/a": "x"}, base_dir=tmp_path)
    try:
        os.symlink("/", ws.root / "link")
        os.symlink("..", ws.root / "in" / "link")
        path = "/".join(parts)
        try:
            resolved = ws.resolve(path)
        except PathEscapeError:
            return
        assert str(resolved) == str(ws.root) or str(resolved).startswith(str(ws.root) + "/")
    finally:
        ws.cleanup()


# ---------------------------------------------------------------- reading


def test_read_text_whole_and_slices(ws: Workspace) -> None:
    """offset/limit count lines (0-based) and keep the newlines."""
    assert ws.read_text("src/util.py") == "X = 1\nY = 2\nX = 3\n"
    assert ws.read_text("src/util.py", offset=1) == "Y = 2\nX = 3\n"
    assert ws.read_text("src/util.py", offset=1, limit=1) == "Y = 2\n"
    assert ws.read_text("src/util.py", offset=10) == ""
    with pytest.raises(WorkspaceError, match="negative"):
        ws.read_text("src/util.py", offset=-1)


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("missing.txt", "does not exist"),
        ("src", "is a directory"),
        ("data/blob.bin", "binary"),
    ],
)
def test_read_text_errors_are_clear(ws: Workspace, path: str, message: str) -> None:
    """Missing files, directories and binaries give an error naming the path."""
    with pytest.raises(WorkspaceError, match=message) as info:
        ws.read_text(path)
    assert repr(path) in info.value.message
    assert info.value.hint


def test_read_text_refuses_huge_files_but_reads_slices(ws: Workspace) -> None:
    """Past the size cap only a slice can be read, and memory stays bounded."""
    big = ws.root / "big.log"
    with open(big, "w") as fh:
        fh.write("first line\n")
        fh.truncate(MAX_READ_BYTES + 10)
    with pytest.raises(WorkspaceError, match="read limit"):
        ws.read_text("big.log")
    (ws.root / "big.txt").write_text("line\n" * (MAX_READ_BYTES // 4))
    assert ws.read_text("big.txt", offset=3, limit=2) == "line\nline\n"
    with pytest.raises(WorkspaceError, match="exceed"):
        ws.read_text("big.txt", limit=MAX_READ_BYTES)


def test_read_text_refuses_fifo(ws: Workspace) -> None:
    """A FIFO planted by a shell command must not hang the host-side tool."""
    os.mkfifo(ws.root / "pipe")
    with pytest.raises(WorkspaceError, match="not a regular file"):
        ws.read_text("pipe")
    with pytest.raises(WorkspaceError, match="not a regular file"):
        ws.write_text("pipe", "x")


# ---------------------------------------------------------------- writing and editing


def test_write_text_creates_parents_and_replaces(ws: Workspace) -> None:
    """Writes make missing directories; an existing file is replaced."""
    ws.write_text("/workspace/new/deep/file.txt", "one")
    assert (ws.root / "new" / "deep" / "file.txt").read_text() == "one"
    ws.write_text("new/deep/file.txt", "two")
    assert ws.read_text("new/deep/file.txt") == "two"
    with pytest.raises(WorkspaceError, match="is a directory"):
        ws.write_text("src", "x")
    with pytest.raises(WorkspaceError, match="is a file"):
        ws.write_text("README.md/inner.txt", "x")


def test_edit_unique_replacement(ws: Workspace) -> None:
    """A unique match is replaced once and the count is returned."""
    assert ws.edit("src/app.py", "return 1", "return 2") == 1
    assert "return 2" in ws.read_text("src/app.py")


def test_edit_errors_say_how_many_occurrences(ws: Workspace) -> None:
    """Not found says 0 occurrences; ambiguous says how many; the file is left unchanged."""
    with pytest.raises(WorkspaceError, match="0 occurrences"):
        ws.edit("src/util.py", "Z = 9", "Z = 0")
    with pytest.raises(WorkspaceError, match="occurs 2 times") as info:
        ws.edit("src/util.py", "X = ", "W = ")
    assert "replace_all" in (info.value.hint or "")
    assert ws.read_text("src/util.py") == "X = 1\nY = 2\nX = 3\n"
    with pytest.raises(WorkspaceError, match="empty"):
        ws.edit("src/util.py", "", "x")


def test_edit_replace_all_returns_count(ws: Workspace) -> None:
    """replace_all replaces every occurrence and reports how many."""
    assert ws.edit("src/util.py", "X = ", "W = ", replace_all=True) == 2
    assert ws.read_text("src/util.py") == "W = 1\nY = 2\nW = 3\n"


# ---------------------------------------------------------------- listing, glob, search


def test_list_dir_sorted_with_dir_slashes(ws: Workspace) -> None:
    """Entries sorted, directories marked with '/'; a file is not listable."""
    assert ws.list_dir() == ["README.md", "data/", "src/"]
    assert ws.list_dir("src") == ["app.py", "util.py"]
    with pytest.raises(WorkspaceError, match="not a directory"):
        ws.list_dir("README.md")
    with pytest.raises(WorkspaceError, match="does not exist"):
        ws.list_dir("nope")


def test_glob_patterns(ws: Workspace) -> None:
    """'*' stays within a segment, '**' spans directories, results are relative and sorted."""
    assert ws.glob("*.md") == ["README.md"]
    assert ws.glob("**/*.py") == ["src/app.py", "src/util.py"]
    assert ws.glob("*.py", path="src") == ["src/app.py", "src/util.py"]
    assert ws.glob("src/[a]pp.py") == ["src/app.py"]
    assert ws.glob("src/[!a]*.py") == ["src/util.py"]
    assert ws.glob("*") == ["README.md", "data/", "src/"]
    with pytest.raises(WorkspaceError, match="must be relative"):
        ws.glob("../*")


def test_glob_does_not_walk_through_links_out(ws: Workspace) -> None:
    """A link to '/' in the workspace does not make glob enumerate the host."""
    os.symlink("/", ws.root / "rootlink")
    assert all(not hit.startswith("rootlink/") for hit in ws.glob("**/*"))


def test_search_grep_like(ws: Workspace) -> None:
    """Regex / literal / case-insensitive search returns (file, line, text); binaries skipped."""
    assert ws.search(r"X = \d") == [("src/util.py", 1, "X = 1"), ("src/util.py", 3, "X = 3")]
    assert ws.search("x = 3", ignore_case=True) == [("src/util.py", 3, "X = 3")]
    assert ws.search("return 1", regex=False, path="src") == [("src/app.py", 2, "    return 1")]
    assert ws.search("binary") == []
    assert len(ws.search("=", max_results=2)) == 2
    assert ws.search("Y", path="src/util.py") == [("src/util.py", 2, "Y = 2")]
    with pytest.raises(WorkspaceError, match="not a valid regular expression"):
        ws.search("(unclosed")


def test_exists_and_snapshot(ws: Workspace) -> None:
    """exists() answers inside the workspace, raises for escapes; snapshot has every file."""
    assert ws.exists("src/app.py")
    assert not ws.exists("nope")
    with pytest.raises(PathEscapeError):
        ws.exists("../x")
    snap = ws.snapshot_files()
    assert set(snap) == {"README.md", "src/app.py", "src/util.py", "data/blob.bin"}
    assert snap["data/blob.bin"] == b"\x00\x01\x02binary"


def test_assign_owner_reowns_existing_and_new_files(ws: Workspace) -> None:
    """While a sandbox runs as another uid, files the host tools create must be owned by it."""
    if os.geteuid() != 0:
        pytest.skip("changing file owners needs root")
    ws.assign_owner(12345, 12345)
    ws.write_text("made/while/running.txt", "x")
    for path in [
        ws.root,
        ws.root / "src" / "app.py",
        ws.root / "made",
        ws.root / "made/while/running.txt",
    ]:
        assert path.stat().st_uid == 12345, path
    ws.release_owner(0, 0)
    ws.write_text("after.txt", "x")
    assert (ws.root / "made/while/running.txt").stat().st_uid == 0
    assert (ws.root / "after.txt").stat().st_uid == 0
