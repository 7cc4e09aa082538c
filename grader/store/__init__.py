"""The judgment store: SQLite keyed by content, its writer and its numbered migrations."""
