"""Lessons and calculator defaults read this server's measured profile (issue 15), or the labelled fallback."""
from __future__ import annotations

import html
import json
import re
from datetime import datetime, timezone
from pathlib import Path

import pytest
from django.urls import reverse

from courseapp.loader import load_course
from courseapp.rendering import ContentError, render_markdown
from serverprofile import figures
from serverprofile.models import MachineProfile

pytestmark = pytest.mark.django_db
REPO_CONTENT = Path(__file__).resolve().parents[2] / "content"
PROPS_RE = re.compile(r'data-calculator="roofline" data-props="([^"]*)"')


def store_profile(**overrides) -> MachineProfile:
    fields = dict(measured_at=datetime(2026, 11, 25, 9, 30, tzinfo=timezone.utc), worker="host:1", device="cpu",
                  device_name="Test EPYC 9999", threads=2, dtype="float32", model="smollm2-135m",
                  engine_version="abc123", torch_version="2.13.0+cpu", bandwidth_gbps=31.42, matmul_gflops=176.3,
                  decode_step_ms=17.5, decode_bytes_per_step=538_357_248, duration_s=0.8)
    return MachineProfile.objects.create(**{**fields, **overrides})


@pytest.fixture
def roofline_lesson(db) -> str:
    for slug in ("overview", "prefill-decode"):  # the lesson and its prerequisite
        load_course(REPO_CONTENT / f"{slug}.md")
    return reverse("courseapp:module", args=["prefill-decode"])


def roofline_props(page: str) -> dict:
    (raw,) = PROPS_RE.findall(page)
    return json.loads(html.unescape(raw))


def test_lesson_shows_the_stored_profile(client, roofline_lesson):
    store_profile(bandwidth_gbps=9.0, matmul_gflops=20.0, measured_at=datetime(2026, 11, 24, tzinfo=timezone.utc))
    store_profile()  # the newest wins
    page = client.get(roofline_lesson).content.decode()
    assert "{{" not in page
    assert "copies memory at 31.4 GB/s and multiplies fp32 matrices at 176 GFLOP/s, a ridge point of 5.6" in page
    assert "took 17.5 ms (57.1 tokens per second) for the 538 MB the engine counts it reading, 30.8 GB/s" in page
    assert "one measurement by this server&#x27;s demo worker while it ran nothing, 2026-11-25 09:30 UTC, on Test EPYC 9999" in page
    assert "14.3" not in page and "56.6" not in page  # the old hard-coded figures


def test_lesson_figures_of_several_idle_measurements_show_their_spread_and_date(client, roofline_lesson):
    """Issue 24: the profile is the median of repeats taken while the worker was idle; a lesson says so."""
    store_profile(repeats=5, bandwidth_spread_gbps=2.0, matmul_spread_gflops=30.0, decode_step_spread_ms=1.5)
    page = client.get(roofline_lesson).content.decode()
    assert "copies memory at 31.4 ± 1.0 GB/s and multiplies fp32 matrices at 176 ± 15 GFLOP/s" in page
    assert "took 17.5 ± 0.75 ms" in page
    assert "the median of 5 measurements by this server&#x27;s demo worker while it ran nothing, 2026-11-25 09:30 UTC" in page
    assert figures.current().text("spread") == ("across 5 idle measurements: bandwidth 2.0 GB/s, matmul 30 GFLOP/s, "
                                                "decode step 1.50 ms (largest − smallest)")
    assert roofline_props(page)["machine"]["note"] == "median of 5 idle measurements 2026-11-25 09:30 UTC"


def test_calculator_defaults_in_the_page_equal_the_profile(client, roofline_lesson):
    row = store_profile()
    props = roofline_props(client.get(roofline_lesson).content.decode())
    machine = props["machine"]
    assert machine["bandwidth_gbps"] == row.bandwidth_gbps and machine["peak_gflops"] == row.matmul_gflops
    assert "Test EPYC 9999" in machine["label"] and machine["note"] == "measured 2026-11-25 09:30 UTC"
    assert props["batch"] == 1 and props["precision"] == "bf16"  # the authored props are kept


def test_without_a_profile_the_recorded_fallback_is_shown_and_labelled(client, roofline_lesson):
    recorded = json.loads(figures.RECORDED_PATH.read_text())
    page = client.get(roofline_lesson).content.decode()
    when = datetime.fromisoformat(recorded["measured_at"]).strftime("%Y-%m-%d %H:%M")
    assert f"recorded on {when} UTC with <code>{recorded['command']}</code> on {recorded['device_name']} CPU" in page
    assert "has not published its own measurement yet" in page
    assert f"copies memory at {recorded['bandwidth_gbps']:.1f} GB/s" in page
    machine = roofline_props(page)["machine"]
    assert machine["bandwidth_gbps"] == recorded["bandwidth_gbps"]
    assert machine["peak_gflops"] == recorded["matmul_gflops"]
    assert machine["note"].startswith("recorded ") and recorded["command"] in machine["note"]


def test_a_lesson_without_figures_costs_no_query(django_assert_num_queries):
    with django_assert_num_queries(0):
        assert figures.fill("<p>No figures {here}.</p>") == "<p>No figures {here}.</p>"


def test_an_unknown_figure_is_an_authoring_error_at_its_line():
    with pytest.raises(ContentError) as exc:
        render_markdown("Intro.\n\nThe server reads {{ server.bandwith_gbps }} GB/s.\n")
    assert exc.value.line == 3 and "bandwidth_gbps" in exc.value.message


def test_narration_speaks_the_recorded_figures():
    rendered = render_markdown("It copies {{ server.bandwidth_gbps }} GB/s ({{ server.provenance }}).\n")
    recorded = figures.recorded()
    (cue,) = rendered.cues
    assert cue.text == (f"It copies {recorded.bandwidth_gbps:.1f} GB/s (recorded on "
                        f"{recorded.measured_at:%-d %B %Y} with {recorded.command}).")
    assert "{{ server.bandwidth_gbps }}" in rendered.html  # the page fills it per request


def test_authoring_preview_fills_the_figures(client, instructor):
    store_profile()
    client.force_login(instructor)
    response = client.post(reverse("authoring:preview"),
                           {"source": "## Hi\n\nBandwidth: {{ server.bandwidth_gbps }} GB/s.\n"})
    assert response.status_code == 200 and "Bandwidth: 31.4 GB/s." in response.content.decode()


@pytest.fixture
def quantization_lesson(db) -> str:
    for slug in ("overview", "prefill-decode", "kv-cache", "quantization"):  # the lesson and its prerequisites
        load_course(REPO_CONTENT / f"{slug}.md")
    return reverse("courseapp:module", args=["quantization"])


def test_quantization_lesson_quotes_this_servers_step_with_its_spread_and_date(client, quantization_lesson):
    """Issue 24: the lesson said the step was "measured when its worker started"; the worker measures only while
    idle, as the median of several repeats. Every place the lesson quotes the step gives its spread and date."""
    store_profile(repeats=5, bandwidth_spread_gbps=2.0, matmul_spread_gflops=30.0, decode_step_spread_ms=1.5)
    text = re.sub(r"\s+", " ", html.unescape(client.get(quantization_lesson).content.decode()))
    assert "when its worker started" not in text
    assert "one fp32 decode step took 17.5 ± 0.75 ms (57.1 tokens per second; the median of 5 measurements by this " \
           "server's demo worker while it ran nothing, 2026-11-25 09:30 UTC" in text
    assert "This server's own fp32 step, quoted at the top of this page, is 17.5 ± 0.75 ms as of 2026-11-25 09:30 UTC " \
           "(across 5 idle measurements: bandwidth 2.0 GB/s, matmul 30 GFLOP/s, decode step 1.50 ms (largest − " \
           "smallest)): its demo worker measures only while it runs nothing" in text


def test_before_any_idle_measurement_the_quantization_lesson_names_the_recorded_single_measurement(client, quantization_lesson):
    text = re.sub(r"\s+", " ", html.unescape(client.get(quantization_lesson).content.decode()))
    recorded = figures.recorded()
    assert f"is {recorded.text('decode_step_ms')} ms as of {recorded.when} (a single measurement)" in text
    assert "this server's demo worker has not published its own measurement yet" in text
