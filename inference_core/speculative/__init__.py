"""Speculative decoding: drafts propose tokens, one target forward verifies them, and the acceptance rule keeps
the target's distribution."""
