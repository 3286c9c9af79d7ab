"""Demo runners: plain functions `run(params, should_stop=None) -> Iterator[dict]` of trace-event dicts.

Each module here backs one live demo; `demos/registry.py` (the Django side) names them by dotted path
and validates `params` before a worker calls them, so runners may assume clean params. Modules with a
`check_params` import the engine inside `run`, so the web process can check a request without loading torch.
"""
