"""The format reference (/author/reference/) documents labs from what the server checks: every demo's lab metrics,
and an example that renders as it stands."""
from __future__ import annotations

from courseapp.rendering import render_markdown
from labs.reference import lab_reference


def test_the_format_reference_lists_the_lab_metrics_and_an_example_that_renders(client, instructor):
    client.force_login(instructor)
    page = client.get("/author/reference/").content.decode()
    assert '<h2 id="labs-title">Labs</h2>' in page and "<code>weight_bytes_per_token</code>" in page
    example = lab_reference()["example"]
    (lab,) = render_markdown(example).labs
    assert lab["configs"][0]["side"] == "fp32"
