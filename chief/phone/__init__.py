"""The phone: the owner's Telegram bot, rung and answered; the notify door (chief.door) hands it
rows to ring, and it imports nothing from the door (the `phone-below-door` import contract).

Named after python-telegram-bot's parts, so a reader who knows that library finds each one:
    updater.py        its `Updater` and its `Application`'s dispatch: the poller task
                      long-polls getUpdates and routes each update (a tap, a reply, a command)
    commands.py       the command handlers (`/status`, `/todos`, `/requests`, `/quiet`, `/help`,
                      `/start`); commands_text.py their pure words and the /quiet override
    answers.py        the tap and reply handlers: recorded in chief.db, toasted, and forwarded
                      to the ledger by the answers' task over engine_link.py (the phone's
                      client of `coop serve`)
    jobqueue.py       its `JobQueue`: the nag task, the rings that come back at a due time;
                      reminders.py (an ask's reminders) and urgent.py (urgent reports' repeats,
                      rungs, Got it) are its `DueRings` sources; second.py the second
                      person's taps and replies (they acknowledge, decide nothing)
    ringer.py         the sender task: rings the durable Telegram queue in order, paced
                      (pacing.py, pure: the token bucket, the digest, quiet hours, backoff), an
                      ask alone with its buttons; locks.py its per-row locks
    asks.py           the ask task: the edits a settled request's ask messages owe, and `reask`
    loop.py           the task loop the ringer, the ask task, the poller and the nag task share

The Bot API itself is `chief.telegram` (the sender, the inbound seam, the pairing, the update
key, the emulator), below the phone; the pure rules it shares with chief.db (chief.answer_rules,
chief.reminder_rules, chief.urgent_rules) sit beside chief.model, below the store. `chief serve`
wires the phone and the door together in chief.serve.
"""
