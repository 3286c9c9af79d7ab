"""`python -m inference_core …`: one sub-command per feature, each a thin layer over the library."""
