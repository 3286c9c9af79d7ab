"""Site search: the full-text index of lessons and glossary entries, kept current by signals, and its page."""
