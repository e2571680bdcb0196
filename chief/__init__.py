"""The Chief's side of the Coop pipeline: the owner's Master Chief conversation, report() and
its drainer (chief.conversation), chief.db (chief.store), the phone (chief.phone: the owner's
Telegram bot) and the notify door (chief.door), wired into `chief serve` by chief.serve.

Layers point inward (the `chief-layers` import contract in pyproject.toml holds them):
chief.store (the only SQL: statements and transactions) <- chief.landing (a report's one hop
and its waiters) <- chief.conversation (the verbs, the turn lock, the one drainer), beside
chief.serve_lock and chief.telegram (the Bot API seam and its emulator) <- chief.phone <-
chief.door / chief.cron <- chief.serve <- chief.cli; chief.model and the pure rules
(answer_rules, reminder_rules, urgent_rules) and the small leaves (errors, config, args) sit
under them all.
Nothing is imported or opened here, so `import chief` stays cheap.
"""
