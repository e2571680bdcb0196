"""The Chief's side of the Coop pipeline: the owner's Master Chief conversation, report() and
its drainer (chief.conversation), chief.db (chief.store), and the notify door (chief.door).

Layers point inward (the `chief-layers` import contract in pyproject.toml holds them):
chief.store (the only SQL: statements and transactions) <- chief.landing (a report's one hop
and its waiters) <- chief.conversation (the verbs, the turn lock, the one drainer), beside
chief.serve_lock and chief.telegram <- chief.door / chief.cron <- chief.cli; chief.model (pure
rules) and the small leaves (errors, config, faults) sit under them all.
Nothing is imported or opened here, so `import chief` stays cheap.
"""
