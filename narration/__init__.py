"""Narration: synthesizing a module's audio and captions, its queue on the `cpu` workers, and serving it (the
`Narration` model stays in courseapp, beside the module it narrates)."""
