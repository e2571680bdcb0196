"""The Coop notifier: drains the engine's outbox to the Chief's notify door, FIFO, a batch of
due head rows at a time (up to `COOP_BATCH_MAX`; one row goes alone).

Layers, pointing inward:

- `outcome`  pure: an HTTP answer (or the lack of one) -> delivered / deferred, backoff with
             jitter, `Retry-After`.
- `holder`   who a worker is (pid, host, process start time) and whether a holder is provably gone.
- `store`    the use cases on outbox delivery state and the `worker_lock` row, each one
             `BEGIN IMMEDIATE` transaction on one dedicated database thread; their SQL is
             `engine.store.queue`'s, the one owner of those tables' statements.
- `client`   the door seam: the httpx client and a test double beside it.
- `worker`   the drain loop and the atomic idle handoff (`drain`, `release_worker_if_idle`).
- `daemon`   the long-running role: kick socket, sleep until due / kick / deadline / backstop.
- `deadlines` the daemon's part that applies the requests' deadlines as they come, through the
             engine's use case (`engine.verbs.deadline`), and says when the next one comes.
- `waiter`   a one-shot drainer's wait for a short deferral (no row without a wakeup).
- `metrics`  the worker's in-process counters, exposed by `coop serve`'s `/metrics`.
- `engine_service` the engine service's process (`coop serve`): the engine's owner endpoint
             and this package's daemon in one process. It lives here because it embeds the
             daemon: the engine never imports the notifier. Its start (settings, ledger, lock,
             sockets) comes before `service_parts`, the apps, the daemon part and the servers.
- `__main__` `coop-notifier serve | run | drain [--max-runs N] [--no-wait]`.
"""
