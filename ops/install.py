"""`ops/install`: the Coop notifier as a systemd service, from this checkout (run as root).

What it makes, each step only when it is missing or differs (so a second run changes nothing,
and says so):

    the `coop` user and group        a system user, no login, home /var/lib/coop
    /opt/coop/.venv                  the project installed from this checkout (root's, 0755)
    /var/lib/coop                    the data folder, 0700 coop:coop
    /var/backups/coop                where coop-backup.service writes, 0700 coop:coop
    /etc/coop/coop.env               from ops/coop.env.example, 0600 root; never overwritten
    the service key                  COOP_SERVICE_KEY_FILE of coop.env, 0600 coop:coop, when
                                     missing
    /etc/systemd/system/coop-*       every unit in ops/systemd, 0644; coop-engine and
                                     coop-chief-door enabled, the timers left disabled

It follows no link it finds at a name it makes or changes (the folders, the settings, the key,
the units): the data folder belongs to `coop`, which could point a name there at a file of
root's, so each is opened relative to its folder's descriptor with O_NOFOLLOW (plumbing.files),
a link refused in one line, and its mode and owner changed on that descriptor.

`--root DIR` does all of it inside DIR (`useradd --prefix`, `systemctl --root`), so a test or
an image build can check the tree without a running systemd. That tree is for inspection, and
says so: its venv's scripts start the Python at DIR/opt/coop/.venv, so it runs where it is, not
copied to /. `--uninstall` disables and removes the units and the venv, and keeps the data,
the backups, the settings and the user (the owner of the data), saying so (`--root DIR`: DIR's
paths). Every expected failure is one line and exit 1.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import pwd
import secrets
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(CHECKOUT))  # plumbing: the standard library only, no install needed
from plumbing import files  # noqa: E402

PROG = "ops/install"
USER = "coop"
VENV = "/opt/coop/.venv"
OPT = "/opt/coop"
DATA = "/var/lib/coop"
BACKUPS = "/var/backups/coop"
SETTINGS_DIR = "/etc/coop"
SETTINGS = "/etc/coop/coop.env"
EXAMPLE = CHECKOUT / "ops" / "coop.env.example"
UNIT_SOURCES = CHECKOUT / "ops" / "systemd"
UNIT_DIR = "/etc/systemd/system"
ENABLED = ("coop-chief-door.service", "coop-engine.service")
KEY_SETTING = "COOP_SERVICE_KEY_FILE"
DEFAULT_KEY = "/var/lib/coop/service.key"
#: What the venv is built from; its digest, written into the venv, says whether it is current.
SOURCES = (
    "pyproject.toml",
    "README.md",
    "engine",
    "notifier",
    "chief",
    "plumbing",
)
STAMP = ".coop-installed"
NOLOGIN = "/usr/sbin/nologin"
COMMAND_TIMEOUT_S = 900


class InstallError(Exception):
    """An expected failure: its message is the one line the operator reads."""


def units() -> list[Path]:
    return sorted([*UNIT_SOURCES.glob("*.service"), *UNIT_SOURCES.glob("*.timer")])


def run(argv: list[str], what: str) -> str:
    """Run a command; its output, or InstallError with its last line of complaint."""
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, check=False
        )
    except FileNotFoundError:
        raise InstallError(f"{what}: {argv[0]} is not installed") from None
    if done.returncode != 0:
        said = (done.stderr.strip() or done.stdout.strip()).splitlines()
        raise InstallError(f"{what} failed: {said[-1] if said else f'exit {done.returncode}'}")
    return done.stdout


class Install:
    """One run against one root: what it changed, in order."""

    def __init__(self, root: Path, python: str, no_deps: bool) -> None:
        self.root = root
        self.python = python
        self.no_deps = no_deps
        self.changed: list[str] = []

    def at(self, path: str) -> Path:
        return self.root / path.lstrip("/")

    def did(self, line: str) -> None:
        self.changed.append(line)
        print(f"{PROG}: {line}")

    @property
    def staged(self) -> bool:
        return self.root != Path("/")

    # ---- the user ------------------------------------------------------------------------

    def _entry(self, database: str) -> list[str] | None:
        """The `coop` line of the root's /etc/passwd or /etc/group, split."""
        path = self.at(f"/etc/{database}")
        if not path.exists():
            return None
        for line in path.read_text(encoding="utf-8").splitlines():
            fields = line.split(":")
            if fields[0] == USER:
                return fields
        return None

    def ids(self) -> tuple[int, int]:
        """The `coop` user's uid and gid, made when missing."""
        if not self.staged:
            try:
                entry = pwd.getpwnam(USER)
                return entry.pw_uid, entry.pw_gid
            except KeyError:
                pass
        elif (found := self._entry("passwd")) is not None:
            return int(found[2]), int(found[3])
        self.at("/etc").mkdir(parents=True, exist_ok=True)
        group = ["--gid", USER] if self._entry("group") else ["--user-group"]
        prefix = ["--prefix", str(self.root)] if self.staged else []
        run(
            ["useradd", *prefix, "--system", *group, "--home-dir", DATA, "--no-create-home",
             "--shell", NOLOGIN, USER],
            f"creating the {USER} user",
        )  # fmt: skip
        self.did(f"created the system user {USER} (no login, home {DATA})")
        return self.ids()

    # ---- files and folders ---------------------------------------------------------------

    def parent(self, path: str) -> int:
        """The descriptor of the folder holding `path` in the root, each missing folder above
        made 0755 root's (a link on the way followed only where nobody but root can write)."""
        return files.open_folder(os.path.dirname(self.at(path)), make=True, mode=0o755)

    def refuse_link(self, path: str) -> InstallError:
        return InstallError(
            f"{path} is a symbolic link: refused, never followed (it may point at a file of"
            " root's); remove it, or put the real file or folder there, and run again"
        )

    def folder(self, path: str, mode: int, uid: int = 0, gid: int = 0) -> None:
        parent = self.parent(path)
        name = os.path.basename(path)
        try:
            try:
                os.mkdir(name, mode, dir_fd=parent)
                made = True
            except FileExistsError:
                made = False
            try:
                fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=parent)
            except OSError as exc:
                if os.path.islink(self.at(path)):
                    raise self.refuse_link(path) from None
                raise InstallError(f"{path} is not a folder: {exc.strerror}") from None
        finally:
            os.close(parent)
        try:
            if made:
                os.fchown(fd, uid, gid)
                os.fchmod(fd, mode)
                self.did(f"created {path} ({mode:04o}, {self.owner(uid, gid)})")
            else:
                self.fix(fd, path, mode, uid, gid)
        finally:
            os.close(fd)

    def existing(self, path: str) -> int | None:
        """The regular file `path` opened read-only, never through a link; None when missing."""
        parent = self.parent(path)
        try:
            flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
            fd = os.open(os.path.basename(path), flags, dir_fd=parent)
        except FileNotFoundError:
            return None
        except OSError as exc:
            if os.path.islink(self.at(path)):
                raise self.refuse_link(path) from None
            raise InstallError(f"{path} cannot be opened: {exc.strerror}") from None
        finally:
            os.close(parent)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise InstallError(f"{path} is not a regular file: refused")
        return fd

    def read(self, fd: int) -> str:
        with os.fdopen(os.dup(fd), "r", encoding="utf-8") as file:
            return file.read()

    def fix(self, fd: int, path: str, mode: int, uid: int, gid: int) -> None:
        """Set an existing file's or folder's mode and owner (on its descriptor) to what the
        install wants, saying so."""
        found = os.fstat(fd)
        if (found.st_mode & 0o7777, found.st_uid, found.st_gid) == (mode, uid, gid):
            return
        if stat.S_ISREG(found.st_mode) and found.st_nlink != 1:
            raise InstallError(
                f"{path} has {found.st_nlink} names (hard links): refused, it may be another"
                " file's; remove it and run again"
            )
        os.fchown(fd, uid, gid)
        os.fchmod(fd, mode)
        self.did(f"set {path} to {mode:04o}, {self.owner(uid, gid)}")

    def owner(self, uid: int, gid: int) -> str:
        return "root" if (uid, gid) == (0, 0) else f"{USER}:{USER}"

    def write(self, path: str, text: str, mode: int, uid: int = 0, gid: int = 0) -> None:
        """A new file, written whole under a fresh name with its mode and owner set on its
        descriptor, made durable and renamed into place (a link at the name is replaced, never
        written through)."""
        os.close(self.parent(path))
        files.write_atomic(self.at(path), text.encode(), mode=mode, owner=(uid, gid))

    # ---- the steps -----------------------------------------------------------------------

    def venv(self) -> None:
        """/opt/coop/.venv with this checkout installed, unless it already holds exactly it."""
        venv = self.at(VENV)
        digest = source_digest(self.no_deps)
        stamp = venv / STAMP
        current = stamp.exists() and stamp.read_text(encoding="ascii").strip() == digest
        if current and (venv / "bin" / "python").exists():
            return
        upgrade = (venv / "bin" / "python").exists()
        if not upgrade:
            venv.parent.mkdir(parents=True, exist_ok=True)
            run([self.python, "-m", "venv", str(venv)], f"creating {VENV}")
            self.did(f"created {VENV} ({self.python})")
        with tempfile.TemporaryDirectory(prefix="coop-install-") as scratch:
            # A clean copy: a build in the checkout would write build/ there and could pick up
            # what an earlier build left in it.
            source = copy_sources(Path(scratch))
            deps = ["--no-deps"] if self.no_deps else []
            run(
                [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet",
                 "--disable-pip-version-check", *deps, str(source)],
                f"installing the project into {VENV}",
            )  # fmt: skip
        stamp.write_text(digest + "\n", encoding="ascii")
        alone = " alone, --no-deps" if self.no_deps else " and its dependencies"
        self.did(f"installed the project from {CHECKOUT} into {VENV}{alone}")
        if upgrade:
            print(f"{PROG}: running services keep the old code until restarted: {RESTART}")

    def settings(self) -> None:
        self.folder(SETTINGS_DIR, 0o755)
        fd = self.existing(SETTINGS)
        if fd is not None:
            try:
                self.fix(fd, SETTINGS, 0o600, 0, 0)  # never rewritten: the operator's settings
            finally:
                os.close(fd)
            return
        self.write(SETTINGS, EXAMPLE.read_text(encoding="utf-8"), 0o600)
        self.did(f"wrote {SETTINGS} from ops/coop.env.example (0600): the bot's token goes there")

    def key(self, uid: int, gid: int) -> None:
        fd = self.existing(SETTINGS)
        text = "" if fd is None else self.read(fd)
        if fd is not None:
            os.close(fd)
        path = setting(text, KEY_SETTING) or DEFAULT_KEY
        fd = self.existing(path)
        if fd is not None:
            try:
                if os.fstat(fd).st_size > 0:
                    self.fix(fd, path, 0o600, uid, gid)
                    return
            finally:
                os.close(fd)
        self.write(path, secrets.token_urlsafe(32) + "\n", 0o600, uid, gid)
        self.did(f"wrote a new service key to {path} (0600, {USER})")

    def units(self) -> bool:
        """Every unit of ops/systemd in /etc/systemd/system; True when one changed."""
        changed = False
        for unit in units():
            path = f"{UNIT_DIR}/{unit.name}"
            text = unit.read_text(encoding="utf-8")
            fd = self.existing(path)
            try:
                if fd is not None and self.read(fd) == text:
                    self.fix(fd, path, 0o644, 0, 0)
                    continue
            finally:
                if fd is not None:
                    os.close(fd)
            verb = "installed" if fd is None else "updated"
            self.write(path, text, 0o644)
            self.did(f"{verb} {path}")
            changed = True
        return changed

    # ---- systemd -------------------------------------------------------------------------

    def systemctl(self) -> list[str] | None:
        """systemctl's argv for this root, or None (said in one line) where it cannot act: not
        installed, or the root is this machine's and systemd does not run it."""
        if shutil.which("systemctl") is None:
            print(f"{PROG}: systemctl is not installed: units not enabled or disabled here")
            return None
        if self.staged:
            return ["systemctl", f"--root={self.root}"]
        if not Path("/run/systemd/system").exists():
            print(f"{PROG}: systemd is not running here: units not enabled, disabled or reloaded")
            return None
        return ["systemctl"]

    def state(self, systemctl: list[str], query: str, unit: str) -> str:
        done = subprocess.run(
            [*systemctl, query, unit], capture_output=True, text=True, check=False, timeout=60
        )
        return done.stdout.strip()

    def enable(self, reload: bool) -> None:
        systemctl = self.systemctl()
        if systemctl is None:
            return
        if reload and not self.staged:
            run([*systemctl, "daemon-reload"], "systemctl daemon-reload")
        for unit in ENABLED:
            if self.state(systemctl, "is-enabled", unit) != "enabled":
                run([*systemctl, "enable", unit], f"enabling {unit}")
                self.did(f"enabled {unit} (not started)")

    def remove_units(self) -> None:
        installed = [u.name for u in units() if self.at(f"{UNIT_DIR}/{u.name}").exists()]
        systemctl = (self.systemctl() if installed else None) or []
        for unit in installed if systemctl else ():
            if not self.staged and self.state(systemctl, "is-active", unit) == "active":
                run([*systemctl, "stop", unit], f"stopping {unit}")
                self.did(f"stopped {unit}")
            if self.state(systemctl, "is-enabled", unit) == "enabled":
                run([*systemctl, "disable", unit], f"disabling {unit}")
                self.did(f"disabled {unit}")
        for unit in installed:
            self.at(f"{UNIT_DIR}/{unit}").unlink()
            self.did(f"removed {UNIT_DIR}/{unit}")
        if installed and systemctl and not self.staged:
            run([*systemctl, "daemon-reload"], "systemctl daemon-reload")

    # ---- the two commands ----------------------------------------------------------------

    def install(self) -> None:
        uid, gid = self.ids()
        self.venv()
        self.folder(DATA, 0o700, uid, gid)
        self.folder(BACKUPS, 0o700, uid, gid)
        self.settings()
        self.key(uid, gid)
        self.enable(reload=self.units())
        where = f" in {self.root}" if self.staged else ""
        if not self.changed:
            print(f"{PROG}: nothing changed: the service is installed from this checkout{where}")
        else:
            print(f"{PROG}: installed{where}; it started no service")
        if self.staged:
            # A venv's scripts name its Python by the path it was made at: this tree's.
            print(
                f"{PROG}: {self.root} is a staged tree for inspection: its scripts start"
                f" {self.at(VENV)}/bin/python, so it runs only where it is, not copied to /;"
                " install on the target machine by running ops/install there without --root"
            )
        print(NEXT)

    def uninstall(self) -> None:
        self.remove_units()
        venv = self.at(VENV)
        if venv.exists():
            shutil.rmtree(venv)
            self.did(f"removed {VENV}")
        opt = self.at(OPT)
        if opt.exists() and not any(opt.iterdir()):
            opt.rmdir()
        if not self.changed:
            print(f"{PROG}: nothing to remove: the service is not installed")
        self.say_kept()

    def say_kept(self) -> None:
        """What --uninstall leaves, and how to remove it once the data is not wanted."""
        kept = [
            f"{self.shown(path)} ({what})"
            for path, what in (
                (DATA, "the data: coop.db, chief.db, the service key"),
                (BACKUPS, "the backups"),
                (SETTINGS, "the settings, with the bot's token"),
            )
            if self.at(path).exists()
        ]
        user = self._entry("passwd") if self.staged else _user_exists()
        if user:
            kept.append(f"the {USER} user (the data's owner)")
        if kept:
            folders = " ".join(self.shown(path) for path in (DATA, BACKUPS, SETTINGS_DIR))
            prefix = f"--prefix {self.root} " if self.staged else ""
            print(
                f"{PROG}: kept {', '.join(kept)}; once the data is not wanted:"
                f" rm -r {folders}; userdel {prefix}{USER}"
            )

    def shown(self, path: str) -> str:
        """`path` where it is: inside the staged root, or the system's own."""
        return str(self.at(path)) if self.staged else path


def _user_exists() -> bool:
    try:
        pwd.getpwnam(USER)
    except KeyError:
        return False
    return True


RESTART = "systemctl restart coop-chief-door coop-engine"
PAIR = (
    f"sudo sh -c 'set -a; . {SETTINGS}; exec runuser -u {USER} -- {VENV}/bin/chief telegram pair'"
)
NEXT = f"""next: put the bot's token in {SETTINGS} (TELEGRAM_BOT_TOKEN), then pair the owner's chat
      as the service user, with the door stopped (Telegram lets one reader take its updates):
        {PAIR}
      then start both: sudo systemctl start coop-chief-door coop-engine"""


# ---- helpers ---------------------------------------------------------------------------------


def setting(text: str, name: str) -> str | None:
    """A setting's value in an environment file's text (`NAME=value`, the last one wins), or
    None."""
    found = None
    for line in text.splitlines():
        key, sep, value = line.strip().partition("=")
        if sep and key == name:
            found = value.strip().strip("'\"") or None
    return found


def source_files() -> list[Path]:
    files = []
    for name in SOURCES:
        path = CHECKOUT / name
        if path.is_dir():
            files += sorted(
                p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts
            )
        else:
            files.append(path)
    return files


def source_digest(no_deps: bool) -> str:
    """What the venv was built from: every source file's path and bytes, and the options."""
    digest = hashlib.sha256(f"no_deps={no_deps}\n".encode())
    for path in source_files():
        digest.update(str(path.relative_to(CHECKOUT)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def copy_sources(scratch: Path) -> Path:
    for path in source_files():
        target = scratch / path.relative_to(CHECKOUT)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    return scratch


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument("--root", default="/", help="install inside this folder (default: /)")
    parser.add_argument("--python", default="python3", help="the venv's Python (3.11+)")
    parser.add_argument("--no-deps", action="store_true", help="install the project alone")
    parser.add_argument("--uninstall", action="store_true", help="remove all but the data")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    options = parse(argv)
    if os.geteuid() != 0:
        print(f"{PROG}: run it as root (sudo {PROG}): it creates a user and writes /opt,"
              " /var/lib and /etc", file=sys.stderr)  # fmt: skip
        return 1
    root = Path(options.root).resolve()
    install = Install(root, options.python, options.no_deps)
    os.umask(0o022)
    try:
        if options.uninstall:
            install.uninstall()
        else:
            root.mkdir(parents=True, exist_ok=True)
            install.install()
    except InstallError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"{PROG}: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": "), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted; run it again to finish", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
