"""The judgment store: SQLite keyed by content, its writer and its numbered migrations."""

from grader.store.binding import register_plain_adapters

register_plain_adapters()  # None and bytes bound at once (see grader.store.binding)
