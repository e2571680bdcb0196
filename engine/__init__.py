"""The Coop engine: the ledger (todos, requests, the append-only event log), the transactional
outbox, the owner service and its compatibility client, and the `coop` CLI.

Nothing here imports httpx, structlog or FastAPI at module level: the CLI's cold start is a
process start, and its import path stays on the standard library and this package.
"""
