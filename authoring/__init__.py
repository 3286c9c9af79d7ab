"""Authoring: the instructors' editor, revisions, images, zip import/export and content-file sync (the content
models stay in courseapp)."""
