"""What every page reads as, in Chromium against the stand-in demo socket (recorded runs, no worker): axe-core finds
no serious or critical WCAG 2.0/2.1/2.2 A and AA violation on any page type at desktop and phone width, and the
charts' defects the issue listed stay fixed (log-axis ticks, round ticks, legend swatches, bytes in one unit,
the KV page's time chart once, the stored-run picker inside its card on a phone, naming what changed)."""
from __future__ import annotations

import io
import math
import re
import wave
from pathlib import Path

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone
from stand_in import stand_in_page
from test_demos_with_recorded_runs import run_every_demo

from courseapp.loader import load_course
from courseapp.models import Module
from narration.jobs import attach_upload
from demos.models import Run, RunEvent

pytestmark = [pytest.mark.browser, pytest.mark.model, pytest.mark.timeout(600)]

REPO_CONTENT = Path(__file__).resolve().parents[2] / "content"
AXE = Path(__file__).resolve().parent / "vendor" / "axe.min.js"  # axe-core 4.14.1 (MPL-2.0), from npm
WCAG = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22a", "wcag22aa"]
PHONE = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True, "device_scale_factor": 2}
DESKTOP = {"viewport": {"width": 1280, "height": 900}}

# Serious and critical violations of rules tagged with a WCAG A/AA level. Rules axe marks "experimental" (among
# them label-content-name-mismatch) only run when asked for by that tag, so it is asked for and the WCAG filter
# applied to the results.
AXE_RUN = """(tags) => axe.run(document, {runOnly: {type: 'tag', values: [...tags, 'experimental']},
    resultTypes: ['violations']})
  .then((r) => r.violations
    .filter((v) => ['serious', 'critical'].includes(v.impact) && v.tags.some((t) => tags.includes(t)))
    .map((v) => `${v.id} (${v.impact}): ` + v.nodes.slice(0, 3).map((n) => n.target.join(' ')).join(' | ')))"""


def axe_violations(page) -> list[str]:
    page.add_script_tag(path=str(AXE))
    return page.evaluate(AXE_RUN, WCAG)


def attach_narration(slug: str) -> None:
    """A short quiet track with one cue per narrated block, so the page shows the audio player."""
    module = Module.objects.get(slug=slug)
    ids = [cue["id"] for cue in module.cues]
    rate, seconds = 8000, len(ids)
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(rate)
        wav.writeframes(b"\x00\x00" * rate * seconds)
    lines = ["WEBVTT", ""]
    for i, cue_id in enumerate(ids):
        lines += [cue_id, f"00:00:{i:06.3f} --> 00:00:{i + 0.95:06.3f}", f"Cue {cue_id}", ""]
    attach_upload(module, SimpleUploadedFile("n.wav", buffer.getvalue()), ".wav",
                  SimpleUploadedFile("n.vtt", "\n".join(lines).encode()), float(seconds))


def stored_run(demo: str, events: list[dict], params: dict, owner: str = "s:nobody", user=None) -> Run:
    now = timezone.now()
    run = Run.objects.create(demo=demo, params=params, status=Run.Status.DONE, owner=owner, user=user, device="cpu",
                             dtype="float32", engine_version="0" * 16, started_at=now, finished_at=now,
                             n_events=len(events))
    RunEvent.objects.bulk_create(RunEvent(run=run, seq=i, type=e["type"], event=e) for i, e in enumerate(events))
    return run


def instructor() -> User:
    teacher = User.objects.create_user("teacher", password="teacher-pass-123")
    group, _ = Group.objects.get_or_create(name="instructor")
    group.permissions.add(Permission.objects.get(codename="instructor", content_type__app_label="courseapp"))
    teacher.groups.add(group)
    return teacher


def log_in(page, base: str) -> None:
    page.goto(f"{base}/accounts/login/")
    page.get_by_label("Username").fill("teacher")
    page.get_by_label("Password").fill("teacher-pass-123")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(lambda url: "/accounts/login/" not in url)


@pytest.mark.parametrize("width", ["desktop", "phone"])
@pytest.mark.django_db(transaction=True)
def test_every_page_type_has_no_serious_accessibility_violation(live_server, chromium, recorded_runs, width):
    """axe-core on every distinct page: the course index, every module (one with the audio player, one after a
    graded quiz), the demos index and each demo page after a run, the engine dashboard, search, login, sign-up,
    a shared run, a missing page, and as an instructor the authoring list, editor, history and class dashboard.
    Lessons are checked before their demos run (empty outputs), demo pages after (filled tables and charts)."""
    load_course(REPO_CONTENT)
    attach_narration("kv-cache")
    share = stored_run("kv-cache", recorded_runs["kv-cache"], {"prompt": "The capital of France is", "max_new_tokens": 6})
    instructor()
    context, page, _ = stand_in_page(chromium, recorded_runs, **(PHONE if width == "phone" else DESKTOP))
    base = live_server.url
    found: dict[str, list[str]] = {}

    def check(path: str, *, run: bool = False, ready: str | None = None) -> None:
        if path:
            page.goto(f"{base}{path}")
        if ready:
            page.wait_for_function(ready, timeout=30_000)
        if run:
            page.locator(".ilab-demo .ilab-run").first.wait_for()
            run_every_demo(page)
        if problems := axe_violations(page):
            found[path or page.url] = problems

    check("/")
    for module in Module.objects.filter(draft=False).in_course_order():
        check(f"/modules/{module.slug}/", ready="() => !document.querySelector('.demo-embed')"
              " || document.querySelector('.ilab-demo .ilab-run')")
    # A graded quiz: verdicts, explanations, the score.
    page.goto(f"{base}/modules/kv-cache/")
    for question in page.locator("#quiz .question").all():
        question.locator("input").first.check()
    page.get_by_role("button", name="Check my answers").click()
    page.locator("#quiz .verdict").first.wait_for()
    check("")
    check("/demos/")
    for name in recorded_runs:
        check(f"/demos/{name}/", run=True)
    check(f"/demos/runs/{share.share_id}/", ready="() => document.querySelector('.ilab-demo')?.dataset.state === 'shared'")
    for path in ("/demos/dashboard/", "/search/?q=cache", "/accounts/login/", "/accounts/signup/", "/no-such-page/"):
        check(path)
    log_in(page, base)
    for path in ("/author/", "/author/new/", "/author/kv-cache/", "/author/kv-cache/history/", "/author/kv-cache/class/"):
        check(path)
    context.close()
    assert found == {}, found


TICK_VALUE = re.compile(r"^(−|-)?([\d.,]+)\s*([kMGT]|[KMGT]iB|B)?$")
SCALE = {"k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}

# Every Plotly axis on the page: its type, its ticks' values and texts, and each trace's legend and bar colours.
AXES = """() => [...document.querySelectorAll('.js-plotly-plot')].map((gd) => ({
  title: (gd._fullLayout.title.text || '').replace(/<[^>]+>/g, ' '),
  axes: Object.keys(gd._fullLayout).filter((k) => /^[xy]axis\\d*$/.test(k)).map((k) => ({
    name: k, type: gd._fullLayout[k].type, title: (gd._fullLayout[k].title || {}).text || '',
    vals: (gd._fullLayout[k]._vals || []).map((v) => v.x), texts: (gd._fullLayout[k]._vals || []).map((v) => v.text)})),
  legendBars: gd._fullLayout.showlegend ? gd._fullData.filter((t) => t.type === 'bar' && t.showlegend !== false
    && Array.isArray(t.marker.color) && new Set(t.marker.color).size > 1).map((t) => t.name) : [],
}))"""


def tick_number(text: str) -> float:
    match = TICK_VALUE.match(text.replace("\u2009", "").strip())
    assert match, f"tick {text!r} is not a number with its unit"
    sign = -1 if match.group(1) else 1
    return sign * float(match.group(2).replace(",", "")) * SCALE.get(match.group(3) or "", 1)


def shown_number(text: str) -> float | None:
    """A tick's number as the reader sees it, in the unit it is written in (SI prefixes applied)."""
    match = TICK_VALUE.match(text.replace("\u2009", "").strip())
    if not match:
        return None
    value = float(match.group(2).replace(",", "")) * (SCALE[match.group(3)] if match.group(3) in ("k", "M", "G", "T") else 1)
    return -value if match.group(1) else value


def round_step(step: float) -> bool:
    mantissa = step / 10 ** math.floor(math.log10(step))
    return any(abs(mantissa - m) < 1e-6 for m in (1, 2, 2.5, 5, 10))


def chart_problems(charts: list[dict]) -> list:
    problems = []
    for chart in charts:
        for bar in chart["legendBars"]:
            problems.append((chart["title"], "legend swatch of a many-coloured bar trace", bar))
        for axis in chart["axes"]:
            texts, vals = axis["texts"], axis["vals"]
            if axis["type"] == "log":
                # Each label a whole value with its magnitude, rising: never "6 7 8 9 100 2 3".
                numbers = [tick_number(t) for t in texts]
                if numbers != sorted(numbers) or len(set(numbers)) != len(numbers):
                    problems.append((chart["title"], axis["name"], "log ticks out of order", texts))
            elif axis["type"] == "linear" and len(vals) >= 2:
                # As read: "100 KiB" steps by 100 (of the unit shown), "1k" by 1000.
                shown = [shown_number(t) for t in texts[:2]]
                step = shown[1] - shown[0] if None not in shown else vals[1] - vals[0]
                if not round_step(abs(step)):
                    problems.append((chart["title"], axis["name"], "ticks not round", texts))
    return problems


@pytest.mark.django_db(transaction=True)
def test_charts_read_as_round_whole_ticks_with_swatches_that_match(live_server, chromium, recorded_runs):
    """After a run of every demo on the lessons with log and twin axes: log ticks are whole values with their
    magnitude ("100 200 500", "1 KiB 32 KiB"), linear ticks step by 1, 2, 2.5 or 5 (prefill-decode's right axis read
    3.14 6.28 9.43), and no legend stands for bars of several colours (its swatch matched none of them)."""
    load_course(REPO_CONTENT)
    context, page, _ = stand_in_page(chromium, recorded_runs, **DESKTOP)
    problems = {}
    for slug in ("quantization", "prefill-decode", "kv-cache", "flash-attention", "paged-attention", "serving"):
        page.goto(f"{live_server.url}/modules/{slug}/")
        page.locator(".ilab-demo .ilab-run").first.wait_for()
        run_every_demo(page)
        charts = page.evaluate(AXES)
        if found := chart_problems(charts):
            problems[slug] = found
        if slug == "quantization":
            scatter = next(c for c in charts if c["title"].startswith("Bytes per token"))
            x = next(a for a in scatter["axes"] if a["name"] == "xaxis")
            assert x["type"] == "log" and len(x["texts"]) >= 2, x
        if slug == "prefill-decode":
            rates = next(c for c in charts if c["title"].startswith("Achieved rates"))
            assert [a for a in rates["axes"] if a["name"] == "yaxis2"][0]["vals"], rates
    context.close()
    assert problems == {}, problems


@pytest.mark.django_db(transaction=True)
def test_the_kv_page_draws_its_time_chart_once_and_its_held_bytes_as_the_card_says(live_server, chromium, recorded_runs):
    load_course(REPO_CONTENT)
    context, page, _ = stand_in_page(chromium, recorded_runs, **DESKTOP)
    page.goto(f"{live_server.url}/modules/kv-cache/")
    page.locator(".ilab-demo .ilab-run").first.wait_for()
    run_every_demo(page)
    run_every_demo(page)  # a second run: the comparison now overlays two
    titles = page.evaluate("[...document.querySelectorAll('.js-plotly-plot')].map((gd) => gd._fullLayout.title.text)")
    assert sum(t.startswith("Time per") for t in titles) == 1, titles
    card = page.locator('[data-metric="kvTotal"]').inner_text()  # "283 KiB"
    ticks, top = page.evaluate("""(() => { const gd = document.querySelector('.ilab-kv__kvchart');
      const held = gd.data[0].y;  // with the cache: what it computed so far is what it holds
      return [gd._fullLayout.yaxis._vals.map((v) => v.text), held[held.length - 1]]; })()""")
    assert ticks and all(re.search(r" (B|KiB|MiB|GiB)$", t) for t in ticks), ticks  # the axis reads in binary units
    assert abs(top - tick_number(card)) <= 0.01 * top, (top, card)  # the held line ends at the card's figure
    context.close()


@pytest.mark.django_db(transaction=True)
def test_the_stored_run_picker_fits_its_card_on_a_phone_and_names_what_changed(live_server, chromium, recorded_runs):
    """At 390 px the picker of stored runs stays inside the demo's card (it was 802–1,641 px wide), and each run's
    label names the setting that differs (serving's "Scheduling", past the first three parameters)."""
    load_course(REPO_CONTENT)
    teacher = instructor()
    events = recorded_runs["serving-load"]
    base_params = {"n_requests": 3, "max_new_tokens": 6, "spacing_s": 0.0, "ttft_slo_s": 3.0, "tpot_slo_s": 0.5,
                   "prompt": "A long prompt that a label would spell out in full, " * 4}
    for mode in ("batched", "sequential"):
        stored_run("serving-load", events, {**base_params, "mode": mode}, owner=f"u:{teacher.pk}", user=teacher)
    context, page, _ = stand_in_page(chromium, recorded_runs, **PHONE)
    log_in(page, live_server.url)
    page.goto(f"{live_server.url}/demos/serving-load/")
    picker = page.get_by_label("Add one of your stored runs")
    page.wait_for_function("() => document.querySelectorAll('.ilab-compare select option').length >= 3")
    labels = picker.evaluate("(sel) => [...sel.options].map((o) => o.textContent)")
    assert any("Scheduling: “sequential”" in t for t in labels) and any("Scheduling: “batched”" in t for t in labels), labels
    card, select, width = page.evaluate("""(() => { const sel = [...document.querySelectorAll('.ilab-compare select')].pop();
      return [sel.closest('.ilab-demo').getBoundingClientRect().right, sel.getBoundingClientRect().right,
              document.scrollingElement.scrollWidth]; })()""")
    assert select <= card + 1 and width <= 390, (select, card, width)
    context.close()
