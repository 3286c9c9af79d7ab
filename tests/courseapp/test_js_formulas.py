"""Run the calculator formula tests (node's built-in test runner) as part of the Python suite."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_calculator_formulas_pass_under_node():
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: the calculator formulas (tests/js/) need Node.js ≥ 20 to run")
    result = subprocess.run([node, "--test", "tests/js/"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"node --test tests/js/ failed:\n{result.stdout[-6000:]}\n{result.stderr[-2000:]}"
    assert "# fail 0" in result.stdout
