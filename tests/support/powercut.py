"""The power-cut layer as a test holds it: a folder that loses, on command, every write that was
not fsynced (`tests.support.powercut_fs` is the filesystem process behind it).

    reason = fuse_unavailable()        # None, or one line saying why FUSE cannot be had here
    layer = Layer(tmp_path / "layer")  # backing folder, mount point, control socket, logs
    layer.mount()                      # a fresh filesystem process over what the disk holds
    layer.path / "coop.db"             # where the stack's files go
    layer.stats()                      # {"held_writes", "held_files", "names_pending"}
    layer.cut(seed=7, keep=0.0, tear=False)   # every process on it must be dead first
    layer.mount()                      # the reboot: the next filesystem over what survived
    layer.close()                      # unmount whatever is mounted (a failed test's too)

A cut answers what it did (`held_writes`, `kept_writes`, `torn`, `names_pending`,
`names_undone`, `errors`) and unmounts: the kernel's own cache of the mount goes with it, so the
next mount reads exactly what reached the backing folder.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.support.procs import REPO, child_env
from tests.support.waiting import WaitTimeout, wait_until_sync

MOUNT_TIMEOUT_S = 15.0
CONTROL_TIMEOUT_S = 30.0
FUSERMOUNT = "fusermount3"


class LayerUnavailable(RuntimeError):
    """The layer could not be mounted here (no FUSE): the suite skips, it does not fail."""


def fuse_unavailable() -> str | None:
    """Why FUSE cannot be had on this machine, in one line; None when it can be tried."""
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse"
    if os.geteuid() != 0:
        return "not root (the power-cut layer mounts as root)"
    if shutil.which(FUSERMOUNT) is None:
        return f"no {FUSERMOUNT} (Debian's fuse3 package)"
    try:
        import mfusepy  # noqa: F401
    except (ImportError, OSError) as exc:
        return f"no FUSE binding ({exc}; the powercut extra: ops/setup-venv test,powercut)"
    return None


class Layer:
    """One power-cut folder: its backing folder on the real disk and its mount point."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.backing = folder / "disk"
        self.path = folder / "mnt"
        self.control = folder / "control.sock"
        self.mounts = 0
        self.process: subprocess.Popen[bytes] | None = None
        for made in (self.backing, self.path):
            made.mkdir(parents=True, exist_ok=True)

    @property
    def log_path(self) -> Path:
        return self.folder / f"layer.{self.mounts}.log"

    @property
    def mounted(self) -> bool:
        """Whether the kernel lists the mount (a dead filesystem's mount too, which a `stat`
        of the mount point cannot see past)."""
        listed = Path("/proc/self/mounts").read_text().split("\n")
        return any(line.split(" ")[1:2] == [str(self.path)] for line in listed)

    def mount(self) -> None:
        """Start a filesystem process over the backing folder; ready once the mount is there."""
        assert self.process is None, "the layer is mounted already"
        self.mounts += 1
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "tests.support.powercut_fs", str(self.backing),
                 str(self.path), "--control", str(self.control)],
                env=child_env(), cwd=REPO, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
            )  # fmt: skip
        process = self.process
        try:
            wait_until_sync(
                lambda: self.mounted or process.poll() is not None,
                timeout_s=MOUNT_TIMEOUT_S,
                what="the power-cut layer to mount",
            )
        except WaitTimeout:
            self.close()
            raise
        if process.poll() is not None or not self.control.exists():
            self.process = None
            raise LayerUnavailable(f"the power-cut layer did not mount: {self._log_tail()}")

    def _log_tail(self) -> str:
        lines = self.log_path.read_text(errors="replace").strip().splitlines()
        return lines[-1] if lines else f"exit {self.process and self.process.returncode}"

    def request(self, **request: Any) -> dict[str, Any]:
        """One request to the filesystem's control socket, its answer."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(CONTROL_TIMEOUT_S)
            sock.connect(str(self.control))
            with sock.makefile("rw") as stream:
                stream.write(json.dumps(request) + "\n")
                stream.flush()
                return dict(json.loads(stream.readline()))

    def stats(self) -> dict[str, int]:
        return {key: int(value) for key, value in self.request(op="stats").items()}

    def cut(self, *, seed: int, keep: float = 0.0, tear: bool = False) -> dict[str, Any]:
        """The power goes: a seeded part of the held writes survives (`keep`, `tear`), the rest
        is dropped, and the layer unmounts. Every process using it must be dead already."""
        figures = self.request(op="cut", seed=seed, keep=keep, tear=tear)
        # What survives is on the backing disk now; the filesystem process goes like the
        # machine would (a file still open in a test fails from here on, as after a reboot).
        if self.process is not None:
            self.process.kill()
        self.unmount()
        return figures

    def unmount(self) -> None:
        """Unmount (lazily if something still holds it) and reap the filesystem process."""
        if self.mounted:
            done = subprocess.run(
                [FUSERMOUNT, "-u", str(self.path)], capture_output=True, check=False
            )
            if done.returncode != 0:
                subprocess.run([FUSERMOUNT, "-u", "-z", str(self.path)], check=False)
        if self.process is not None:
            try:
                self.process.wait(MOUNT_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(MOUNT_TIMEOUT_S)
            self.process = None

    def close(self) -> None:
        """Unmount whatever is mounted, without a cut (a test's teardown)."""
        self.unmount()
