"""The machine-local parts the three packages share, written once below them all, so that no
package keeps a copy of another's code:

    files.py     files and folders opened relative to a folder's descriptor, without following a
                 link, their mode and owner set on the open descriptor
    keyfile.py   the one reader of a key file (the service key, the owner credential): this
                 user's alone, one short line; where the service key is
    home.py      the data folder (COOP_HOME, else XDG_DATA_HOME/coop, else ~/.local/share/coop)
                 and chief.db in it
    wire.py      what the two sides say over HTTP: the key header, the door's routes, the text
                 limit, the client's timeout
    unix.py      a service's socket in its private folder: bound by the service, checked by a
                 client before it sends a secret, and the caller's uid read from the kernel
    http/        the HTTP server every loopback service runs on (the connection gate, the body
                 bounds, the quiet stop) and the client half over a checked Unix socket
    dbcheck.py   a database from outside (a backup to restore) checked before anything trusts it:
                 read-only and defensive, its schema against a reference the owner's migrations
                 build, then its integrity
    terminal.py  what a terminal may be given of a text: every line `coop` and `chief` print
    faults.py    the test-only crash points (`COOP_TEST_FAULTS`), one grammar for every process
    wal.py       a fresh SQLite file switched to WAL while another opener switches it
    pidlock.py   one process per file: a `flock` holding its holder's pid
    db_thread.py an async store's one connection on one thread, each transaction one hop
    logs.py      the services' structlog set-up, and a JSON line without structlog
    loopback.py  who may knock on a loopback listener: the peer, Host, browser-header and
                 cross-site rules (every guard reads them: the engine service's, the door's, the
                 Telegram emulator's)
    refusals.py  a guard's refusals counted, summed up in one log line a minute per reason
    settings.py  a setting's number (ASCII digits only) or switch (its documented words)
    bounds.py    a request's nag bounds, which the engine files within and the door holds
    door.py      where the door (`chief serve`) listens: COOP_DOOR_SOCKET, default
                 <COOP_HOME>/door.sock, for it and every client of it
    service.py   where the engine service (`coop serve`) listens: COOP_SERVICE_SOCKET, default
                 <COOP_HOME>/service.sock, for it and every client of it

It imports nothing from `engine`, `notifier` or `chief` (an import contract holds that). A base
module that fails raises a built-in error, or the error type its caller passes in; the package
words it at its edge. The modules the `coop` CLI's cold path loads (bounds, faults, files, home,
keyfile, settings, terminal, wal, wire) import the standard library only (the `plumbing-cold`
contract; tests/arch/test_cli_cold_path.py names them); db_thread needs anyio, logs imports
structlog when a process configures it, and the server half of `http` runs on uvicorn.
"""
