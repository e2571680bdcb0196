"""Telegram for the Chief: the sender seam (`sender`) and a local Bot API emulator (`emulator`)."""
