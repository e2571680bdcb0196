"""The ledger's public functions, by the names library callers and the docs use.

Each is its verb (`engine.verbs.ledger`, the one source: signature, docstring, `coop` command)
run through `engine.api`, the edge that decides local or owner service; the SQL is
`engine.store.ledger`'s.
"""

from __future__ import annotations

from engine.api import public
from engine.verbs import ledger as _verbs

add_todo = public(_verbs.add_todo)
take_todo = public(_verbs.take_todo)
release_todo = public(_verbs.release_todo)
done_todo = public(_verbs.done_todo)
abandon_todo = public(_verbs.abandon_todo)
show_todo = public(_verbs.show_todo)
add_request = public(_verbs.add_request)
take_request = public(_verbs.take_request)
release_request = public(_verbs.release_request)
close_request = public(_verbs.close_request)
show_request = public(_verbs.show_request)
wait_request = public(_verbs.wait_request)
list_items = public(_verbs.list_items)
history = public(_verbs.history)
