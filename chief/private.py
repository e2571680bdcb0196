"""Private by construction: chief's names for the one rule of the files it trusts and the makers
of its folders and files, owner-only whatever the umask, never through a link. The rule and the
code are `plumbing.files`, written once below the engine, the notifier and chief; this module
keeps the names chief's callers use.

    trust_problem(info, path, what)   why a file the door trusts (the service key, the Telegram
                                      pairing file) must be refused, or None
    make_folders(folder)              every missing folder of the path made 0700
    private_file(path)                a file made 0600 if missing; one of this user's tightened
    private_database(path)            the same for chief.db and its -wal and -shm
    write_atomic(path, data)          a new 0600 file put in place whole, never through a link
    fsync_folder(folder)              a rename or an unlink in the folder made durable

A planted pairing would name another chat, and the door would ring it: trusted files are
refused, never repaired; chief.db, its -wal/-shm and its lock of this user's are tightened on
their descriptor; a link at a name chief writes is refused in one line.
"""

from __future__ import annotations

from plumbing.files import FILE_MODE as FILE_MODE
from plumbing.files import FOLDER_MODE as FOLDER_MODE
from plumbing.files import OTHERS_BITS as OTHERS_BITS
from plumbing.files import SQLITE_SIDE_FILES as SQLITE_SIDE_FILES
from plumbing.files import fsync_folder as fsync_folder
from plumbing.files import make_folders as make_folders
from plumbing.files import private_database as private_database
from plumbing.files import private_file as private_file
from plumbing.files import tighten as tighten
from plumbing.files import trust_problem as trust_problem
from plumbing.files import write_atomic as write_atomic
