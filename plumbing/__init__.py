"""The machine-local parts the three packages share, written once below them all: how a file
the product writes is opened (never through a link, never into another user's folder) and how
a service's private Unix socket is bound and checked before a client trusts it.

    files.py   files and folders opened relative to a folder's descriptor, without following a
               link, their mode and owner set on the open descriptor
    unix.py    a service's socket in its private folder: bound by the service, checked by a
               client before it sends a secret, and the caller's uid read from the kernel
    dbcheck.py a database from outside (a backup to restore) checked before anything trusts it:
               read-only and defensive, its schema against a reference the owner's migrations
               build, then its integrity
    loopback.py  who may knock on a loopback listener: the peer, Host, browser-header and
               cross-site rules (the engine service and the Telegram emulator read them)
    refusals.py  a guard's refusals counted, summed up in one log line a minute per reason
    settings.py  a setting's number (ASCII digits only) or switch (its documented words)
    bounds.py  a request's nag bounds, which the engine files within and the door holds

It imports nothing from `engine`, `notifier` or `chief` (an import contract holds that), and only
the standard library, so the `coop` CLI's cold path may load it.
"""
