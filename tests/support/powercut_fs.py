"""The power-cut filesystem: a passthrough FUSE filesystem over a backing folder that keeps every
write in a page cache of its own until the file is fsynced, and forgets it on a cut.

    python -m tests.support.powercut_fs BACKING MOUNT --control SOCKET

What reaches the backing folder, and when (the model is a journaling filesystem under POSIX's
promises, no more):

- **Data.** A `write` or a `truncate` changes the file as every reader sees it at once, but the
  backing file only at `fsync`/`fdatasync` of that file (SQLite's syncs). Until then the write
  is held: its pages in memory (what reads see), and the write itself in order (what a cut may
  keep).
- **Names.** A create, an unlink, a rename or a mkdir happens in the backing folder at once (so
  that open files keep their inode), but each is journaled with what undoes it: an unlinked or
  replaced file is moved to a graves folder beside the backing folder. An `fsync` of a directory
  commits the name changes in that directory, and only those (POSIX's promise; ext4's journal
  happens to commit more): a new folder needs its parent synced too, and a file's own fsync
  makes its data durable, never its name (SQLite syncs the directory of a new WAL, the owner's
  receipts sync theirs).
- **A cut** (the control socket's `cut`, sent once every process of the stack is dead): the
  writes held are dropped, or, with `keep` > 0, each reached the disk before the power went
  with that probability (in any order: the kernel writes pages back as it likes), and with
  `tear` the last write reached the disk only in part (a seeded prefix of its 512-byte
  sectors). The name changes not committed are undone from the last, except a seeded prefix
  (with probability `keep`, each in order, until the first one lost). Then the layer answers
  what it did and refuses every further operation (EIO) until it is unmounted; the next mount
  is a fresh process over what survived, as after a reboot.

The control socket speaks one JSON object a line: `{"op": "stats"}`,
`{"op": "cut", "seed": S, "keep": 0.0, "tear": false}`, and `{"op": "stall", "name": N,
"pid": P, "min_bytes": B}` / `{"op": "unstall"}`: process P's next fsync of a file whose name
holds N, once it wrote B bytes there (default a page: a commit's frames, not a WAL header),
blocks (its writes stay held; `stats` says `stalled`) until released, then fails, so a process
can be killed inside its fsync.
`tests.support.powercut` is the side a test holds (mount, cut, unmount); this module is the
other process and runs nothing at import.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import random
import shutil
import socket
import stat
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PAGE_BYTES = 4096
SECTOR_BYTES = 512
STAT_KEYS = ("st_mode", "st_nlink", "st_uid", "st_gid", "st_size", "st_ino", "st_atime_ns",
             "st_mtime_ns", "st_ctime_ns")  # fmt: skip
STATVFS_KEYS = ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail", "f_ffree", "f_files",
                "f_flag", "f_frsize", "f_namemax")  # fmt: skip


class Node:
    """One backing file's unsynced state: the pages written since its last fsync (their current
    content), its size as readers see it, and the held writes in order."""

    def __init__(self, fd: int, size: int) -> None:
        self.fd = fd
        self.opens = 0
        self.size = size
        # Backing bytes at or past `floor` are stale (a truncate since the last sync cut them).
        self.floor = size
        self.pages: dict[int, bytearray] = {}
        # (sequence, offset, data) for a write; (sequence, size, None) for a truncate.
        self.held: list[tuple[int, int, bytes | None]] = []

    def _backing(self, offset: int, length: int) -> bytes:
        limit = max(0, min(length, self.floor - offset))
        raw = os.pread(self.fd, limit, offset) if limit else b""
        return raw + bytes(length - len(raw))

    def _page(self, index: int) -> bytearray:
        page = self.pages.get(index)
        if page is None:
            page = bytearray(self._backing(index * PAGE_BYTES, PAGE_BYTES))
            self.pages[index] = page
        return page

    def read(self, size: int, offset: int) -> bytes:
        end = min(offset + size, self.size)
        out = bytearray()
        pos = offset
        while pos < end:
            index, within = divmod(pos, PAGE_BYTES)
            take = min(PAGE_BYTES - within, end - pos)
            page = self.pages.get(index)
            out += page[within : within + take] if page is not None else self._backing(pos, take)
            pos += take
        return bytes(out)

    def write(self, data: bytes, offset: int, sequence: int) -> None:
        pos = 0
        while pos < len(data):
            index, within = divmod(offset + pos, PAGE_BYTES)
            take = min(PAGE_BYTES - within, len(data) - pos)
            self._page(index)[within : within + take] = data[pos : pos + take]
            pos += take
        self.size = max(self.size, offset + len(data))
        self.held.append((sequence, offset, data))

    def truncate(self, size: int, sequence: int) -> None:
        if size < self.size:
            for index in [i for i in self.pages if i * PAGE_BYTES >= size]:
                del self.pages[index]
            index, within = divmod(size, PAGE_BYTES)
            if within:  # the cut page's tail reads as zeros if the file grows again
                self._page(index)[within:] = bytes(PAGE_BYTES - within)
            self.floor = min(self.floor, size)
        self.size = size
        self.held.append((sequence, size, None))

    def sync(self) -> None:
        """fsync: the file as readers see it becomes the backing file, durably."""
        os.ftruncate(self.fd, self.floor)
        for index, page in self.pages.items():
            start = index * PAGE_BYTES
            if start < self.size:
                os.pwrite(self.fd, bytes(page[: min(PAGE_BYTES, self.size - start)]), start)
        os.ftruncate(self.fd, self.size)
        os.fsync(self.fd)
        self.pages.clear()
        self.held.clear()
        self.floor = self.size


@dataclass
class NameChange:
    """One journaled name change and what undoes it (graves hold what it removed)."""

    kind: str  # create, mkdir, unlink, rename
    path: str  # the name it made or removed (a rename: the new name)
    old: str = ""  # a rename's old name
    grave: str = ""  # where the removed or replaced file waits, if any

    @property
    def folders(self) -> set[str]:
        """The directories whose fsync commits this change (a rename: either of its two)."""
        return {os.path.dirname(name) or "/" for name in (self.path, self.old) if name}


@dataclass
class CutFigures:
    held_writes: int = 0
    kept_writes: int = 0
    torn: dict[str, Any] | None = None
    names_pending: int = 0
    names_undone: int = 0
    errors: list[str] = field(default_factory=list)


class PowerCutFS:
    """The filesystem's operations (the mfusepy `Operations` protocol, by duck typing)."""

    use_ns = True  # mfusepy: times in nanoseconds

    def __init__(self, backing: Path, graves: Path, caller: Callable[[], int] = lambda: 0) -> None:
        self.backing = backing
        self.caller = caller  # the pid of the process whose request is being served
        self.graves = graves
        # Named so that mfusepy does not take it for the `lock` operation (locks stay local).
        self.mutex = threading.RLock()
        self.nodes: dict[int, Node] = {}  # by backing inode
        self.handles: dict[int, tuple[Node, int]] = {}  # fh -> (node, open flags)
        self.next_fh = 1
        self.sequence = 0
        self.journal: list[NameChange] = []
        self.dead = False
        # `stall` (see the module docstring): a process killed inside its fsync.
        self.stall_name = ""
        self.stall_pid = 0
        self.stall_ready = False
        self.stall_written = 0
        self.stall_bytes = PAGE_BYTES
        self.stalled = threading.Event()
        self.unstall = threading.Event()

    # -- plumbing ---------------------------------------------------------------------------

    def _real(self, path: str) -> str:
        return str(self.backing) + path

    def _tick(self) -> int:
        if self.dead:
            raise OSError(errno.EIO, "the power is cut")
        self.sequence += 1
        return self.sequence

    def _grave(self) -> str:
        self.sequence += 1
        return str(self.graves / f"grave-{self.sequence}")

    def _node(self, path: str) -> Node:
        ino = os.lstat(self._real(path)).st_ino
        node = self.nodes.get(ino)
        if node is None:
            fd = os.open(self._real(path), os.O_RDWR)
            node = Node(fd, os.fstat(fd).st_size)
            self.nodes[ino] = node
        return node

    def _handle(self, node: Node, flags: int) -> int:
        with self.mutex:
            node.opens += 1
            fh = self.next_fh
            self.next_fh += 1
            self.handles[fh] = (node, flags)
            return fh

    def _forget_if_idle(self, node: Node) -> None:
        if node.opens == 0 and not node.held:
            ino = os.fstat(node.fd).st_ino
            os.close(node.fd)
            self.nodes.pop(ino, None)

    # -- attributes and directories ---------------------------------------------------------

    def getattr(self, path: str | None, fh: int | None = None) -> dict[str, Any]:
        with self.mutex:
            if path is None and fh is not None:
                node = self.handles[fh][0]
                st = os.fstat(node.fd)
            else:
                st = os.lstat(self._real(path or "/"))
                node = self.nodes.get(st.st_ino) if stat.S_ISREG(st.st_mode) else None
            attrs = {key: getattr(st, key) for key in STAT_KEYS}
            for key in ("atime", "mtime", "ctime"):
                attrs[f"st_{key}"] = attrs.pop(f"st_{key}_ns")
            if node is not None:
                attrs["st_size"] = node.size
            return attrs

    def readdir(self, path: str, fh: int) -> Iterator[str]:
        yield from (".", "..", *os.listdir(self._real(path)))

    def opendir(self, path: str) -> int:
        return 0

    def releasedir(self, path: str, fh: int) -> int:
        return 0

    def fsyncdir(self, path: str, datasync: int, fh: int) -> int:
        """A directory's fsync commits the name changes made in it."""
        with self.mutex:
            self._tick()
            kept = []
            for change in self.journal:
                if path not in change.folders:
                    kept.append(change)
                elif change.grave:
                    self._bury(change.grave)
            self.journal = kept
            return 0

    def _bury(self, grave: str) -> None:
        if os.path.isdir(grave) and not os.path.islink(grave):
            shutil.rmtree(grave, ignore_errors=True)
        elif os.path.lexists(grave):
            os.unlink(grave)

    def statfs(self, path: str) -> dict[str, int]:
        sv = os.statvfs(self._real(path))
        return {key: getattr(sv, key) for key in STATVFS_KEYS}

    def chmod(self, path: str, mode: int) -> int:
        os.chmod(self._real(path), mode)
        return 0

    def chown(self, path: str, uid: int, gid: int) -> int:
        os.chown(self._real(path), uid, gid)
        return 0

    def utimens(self, path: str, times: tuple[int, int] | None = None) -> int:
        if times is None:
            os.utime(self._real(path))
        else:
            os.utime(self._real(path), ns=times)
        return 0

    def access(self, path: str, amode: int) -> int:
        if not os.access(self._real(path), amode):
            raise OSError(errno.EACCES, "")
        return 0

    # -- name changes (journaled) -----------------------------------------------------------

    def mkdir(self, path: str, mode: int) -> int:
        with self.mutex:
            self._tick()
            os.mkdir(self._real(path), mode)
            self.journal.append(NameChange("mkdir", path))
            return 0

    def rmdir(self, path: str) -> int:
        with self.mutex:
            self._tick()
            grave = self._grave()
            os.rename(self._real(path), grave)
            self.journal.append(NameChange("unlink", path, grave=grave))
            return 0

    def mknod(self, path: str, mode: int, dev: int) -> int:
        with self.mutex:
            self._tick()
            os.mknod(self._real(path), mode, dev)
            self.journal.append(NameChange("create", path))
            return 0

    def create(self, path: str, mode: int, fi: Any = None) -> int:
        with self.mutex:
            self._tick()
            fd = os.open(self._real(path), os.O_RDWR | os.O_CREAT | os.O_EXCL, mode)
            os.close(fd)
            self.journal.append(NameChange("create", path))
            return self._handle(self._node(path), int(fi or 0))

    def unlink(self, path: str) -> int:
        with self.mutex:
            self._tick()
            grave = self._grave()
            os.rename(self._real(path), grave)
            self.journal.append(NameChange("unlink", path, grave=grave))
            return 0

    def rename(self, old: str, new: str) -> int:
        with self.mutex:
            self._tick()
            grave = ""
            if os.path.lexists(self._real(new)):
                grave = self._grave()
                os.rename(self._real(new), grave)
            os.rename(self._real(old), self._real(new))
            self.journal.append(NameChange("rename", new, old=old, grave=grave))
            return 0

    def symlink(self, target: str, source: str) -> int:
        raise OSError(errno.EPERM, "the power-cut layer keeps no symlinks")

    def link(self, target: str, source: str) -> int:
        raise OSError(errno.EPERM, "the power-cut layer keeps no hard links")

    # -- data (held until fsync) ------------------------------------------------------------

    def open(self, path: str, flags: int) -> int:
        with self.mutex:
            if self.dead:
                raise OSError(errno.EIO, "the power is cut")
            node = self._node(path)
            if flags & os.O_TRUNC:
                node.truncate(0, self._tick())
            return self._handle(node, flags)

    def read(self, path: str | None, size: int, offset: int, fh: int) -> bytes:
        with self.mutex:
            if self.dead:
                raise OSError(errno.EIO, "the power is cut")
            return self.handles[fh][0].read(size, offset)

    def write(self, path: str | None, data: bytes, offset: int, fh: int) -> int:
        with self.mutex:
            node, flags = self.handles[fh]
            node.write(data, node.size if flags & os.O_APPEND else offset, self._tick())
            if (
                self.stall_name
                and self.stall_name in os.path.basename(path or "")
                and self.caller() == self.stall_pid
            ):
                self.stall_written += len(data)  # the kernel splits a frame at page boundaries
                self.stall_ready = self.stall_written >= self.stall_bytes
            return len(data)

    def truncate(self, path: str | None, length: int, fh: int | None = None) -> int:
        with self.mutex:
            node = self.handles[fh][0] if fh is not None else self._node(path or "/")
            node.truncate(length, self._tick())
            if fh is None:
                self._forget_if_idle(node)
            return 0

    def fsync(self, path: str | None, datasync: int, fh: int) -> int:
        with self.mutex:
            stall = (
                self.stall_ready
                and bool(self.stall_name)
                and self.stall_name in os.path.basename(path or "")
                and self.caller() == self.stall_pid
            )
            if stall:  # once only
                self.stall_name, self.stall_ready = "", False
                self.stalled.set()
        if stall:
            self.unstall.wait()  # outside the mutex: every other operation goes on
            raise OSError(errno.EIO, "the fsync never completed")
        with self.mutex:
            self._tick()
            self.handles[fh][0].sync()
            return 0

    def flush(self, path: str | None, fh: int) -> int:
        return 0

    def release(self, path: str | None, fh: int) -> int:
        with self.mutex:
            node, _ = self.handles.pop(fh)
            node.opens -= 1
            self._forget_if_idle(node)
            return 0

    # -- the cut ----------------------------------------------------------------------------

    def cut(self, seed: int, keep: float, tear: bool) -> CutFigures:
        """The power goes: keep a seeded part of what is held (see the module docstring), drop
        the rest, and refuse every operation from now on."""
        self.unstall.set()
        with self.mutex:
            self.dead = True
            rng = random.Random(seed)
            figures = CutFigures()
            self._cut_data(rng, keep, tear, figures)
            self._cut_names(rng, keep, figures)
            return figures

    def _cut_data(self, rng: random.Random, keep: float, tear: bool, figures: CutFigures) -> None:
        held = sorted(
            (entry[0], id(node), node, entry) for node in self.nodes.values() for entry in node.held
        )
        figures.held_writes = len(held)
        last = held[-1][0] if held else None
        for sequence, _, node, (_, where, data) in held:
            if tear and sequence == last and data is not None and len(data) > 1:
                sectors = max(1, len(data) // SECTOR_BYTES)
                unit = SECTOR_BYTES if sectors > 1 else 1
                kept = rng.randrange(1, sectors if sectors > 1 else len(data)) * unit
                os.pwrite(node.fd, data[:kept], where)
                figures.torn = {"bytes_kept": kept, "of": len(data), "offset": where}
            elif rng.random() < keep:
                figures.kept_writes += 1
                if data is None:
                    os.ftruncate(node.fd, where)
                else:
                    os.pwrite(node.fd, data, where)
        for node in self.nodes.values():
            os.fsync(node.fd)

    def _cut_names(self, rng: random.Random, keep: float, figures: CutFigures) -> None:
        figures.names_pending = len(self.journal)
        survived = 0
        while survived < len(self.journal) and rng.random() < keep:
            survived += 1
        for change in reversed(self.journal[survived:]):
            try:
                self._undo(change)
                figures.names_undone += 1
            except OSError as exc:  # reported, never hidden: a test reads `errors`
                figures.errors.append(f"undo {change}: {exc}")
        for change in self.journal[:survived]:
            if change.grave:
                self._bury(change.grave)
        self.journal.clear()

    def _undo(self, change: NameChange) -> None:
        real = self._real(change.path)
        if change.kind == "create":
            os.unlink(real)
        elif change.kind == "mkdir":
            shutil.rmtree(real)
        elif change.kind == "unlink":
            os.rename(change.grave, real)
        elif change.kind == "rename":
            os.rename(real, self._real(change.old))
            if change.grave:
                os.rename(change.grave, real)

    def stats(self) -> dict[str, int]:
        with self.mutex:
            return {
                "held_writes": sum(len(n.held) for n in self.nodes.values()),
                "held_files": sum(1 for n in self.nodes.values() if n.held),
                "names_pending": len(self.journal),
                "stalled": int(self.stalled.is_set() and not self.unstall.is_set()),
            }


def process_of(thread_id: int) -> int:
    """The process a thread belongs to (FUSE names the calling thread; `coop serve` commits
    from a worker thread of its own)."""
    try:
        status = Path(f"/proc/{thread_id}/status").read_text()
    except OSError:  # gone already
        return thread_id
    for line in status.splitlines():
        if line.startswith("Tgid:"):
            return int(line.split()[1])
    return thread_id


def serve_control(fs: PowerCutFS, path: Path) -> None:
    """Answer the control socket's requests, one JSON line each, until the process ends."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    if path.exists():
        path.unlink()
    server.bind(str(path))
    server.listen(4)

    def loop() -> None:
        while True:
            conn, _ = server.accept()
            with conn, conn.makefile("rw") as stream:
                for line in stream:
                    stream.write(json.dumps(answer(fs, json.loads(line))) + "\n")
                    stream.flush()

    threading.Thread(target=loop, name="powercut-control", daemon=True).start()


def answer(fs: PowerCutFS, request: dict[str, Any]) -> dict[str, Any]:
    if request.get("op") == "stats":
        return fs.stats()
    if request.get("op") == "stall":
        fs.stall_name, fs.stall_pid = str(request["name"]), int(request["pid"])
        fs.stall_bytes = int(request.get("min_bytes", PAGE_BYTES))
        return {"stalling": fs.stall_name}
    if request.get("op") == "unstall":
        fs.unstall.set()
        return {"unstalled": True}
    if request.get("op") == "cut":
        figures = fs.cut(int(request["seed"]), float(request["keep"]), bool(request["tear"]))
        return figures.__dict__
    return {"error": f"unknown request {request!r}"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="powercut_fs")
    parser.add_argument("backing", type=Path)
    parser.add_argument("mount", type=Path)
    parser.add_argument("--control", type=Path, required=True)
    args = parser.parse_args(argv)
    try:
        import mfusepy
    except (ImportError, OSError) as exc:  # no binding, or no libfuse on this machine
        print(f"powercut_fs: FUSE is not available here ({exc})", file=sys.stderr)
        return 2
    backing = args.backing.resolve()
    graves = backing.with_name(backing.name + ".graves")
    graves.mkdir(exist_ok=True)
    fs = PowerCutFS(backing, graves, caller=lambda: process_of(mfusepy.fuse_get_context()[2]))
    serve_control(fs, args.control)
    try:
        mfusepy.FUSE(fs, str(args.mount), foreground=True, hard_remove=True, fsname="powercut")
    except RuntimeError as exc:
        print(f"powercut_fs: the mount failed ({exc})", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
