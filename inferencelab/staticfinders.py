"""Static files that come from installed packages rather than from this repository."""
from __future__ import annotations

import importlib.resources
from pathlib import Path

from django.contrib.staticfiles.finders import BaseFinder
from django.core.checks import Error
from django.core.files.storage import FileSystemStorage


class PlotlyBundleFinder(BaseFinder):
    """`vendor/plotly.min.js` is the `plotly` package's own bundled file, served as is: no copy in the
    repository to drift from the installed version, and no CDN. (The bundle names CDN addresses only as
    defaults for map and geo traces, which no chart here uses.)"""

    url_path = "vendor/plotly.min.js"

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.source = Path(str(importlib.resources.files("plotly") / "package_data" / "plotly.min.js"))
        self.storage = FileSystemStorage(location=str(self.source.parent))
        self.storage.prefix = "vendor"

    def check(self, **kwargs):
        if not self.source.is_file():
            return [Error(f"the plotly package has no bundled {self.source}", id="inferencelab.E001")]
        return []

    def find(self, path, find_all=False, **kwargs):
        """The bundle's path for `vendor/plotly.min.js`; otherwise [] (Django's "no match", whatever find_all)."""
        if path != self.url_path or not self.source.is_file():
            return []
        find_all = find_all or kwargs.get("all", False)
        return [str(self.source)] if find_all else str(self.source)

    def list(self, ignore_patterns):
        if self.source.is_file():
            yield self.source.name, self.storage
