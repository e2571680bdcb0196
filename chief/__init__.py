"""The Chief's side of the Coop pipeline: the owner's Master Chief conversation, report() and
its drainer (chief.conversation), chief.db (chief.store), and the notify door (chief.door).

Layers point inward: chief.model (pure rules) <- chief.store (the only SQL) <-
chief.conversation (the verbs) <- chief.cli / chief.door (entry points).
Nothing is imported or opened here, so `import chief` stays cheap.
"""
