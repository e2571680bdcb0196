"""The machine-local parts the three packages share, written once below them all: how a file
the product writes is opened (never through a link, never into another user's folder) and how
a service's private Unix socket is bound and checked before a client trusts it.

    files.py   files and folders opened relative to a folder's descriptor, without following a
               link, their mode and owner set on the open descriptor
    unix.py    a service's socket in its private folder: bound by the service, checked by a
               client before it sends a secret, and the caller's uid read from the kernel
    service.py where the engine service (`coop serve`) listens: COOP_SERVICE_SOCKET, default
               <COOP_HOME>/service.sock, for it and every client of it

It imports nothing from `engine`, `notifier` or `chief` (an import contract holds that), and only
the standard library, so the `coop` CLI's cold path may load it.
"""
