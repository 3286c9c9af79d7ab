"""The demos as a student meets them, against a stand-in websocket server that replays runs recorded from the
real demo runners in this process (no Redis, no worker): the charts on a phone, the empty-chart note before
a first run, one look for every Stop button, and a rate limit's countdown."""
from __future__ import annotations

from pathlib import Path

import pytest

from courseapp.loader import load_course
from courseapp.models import Module

from stand_in import stand_in_page

pytestmark = [pytest.mark.browser, pytest.mark.model, pytest.mark.timeout(600)]

REPO_CONTENT = Path(__file__).resolve().parents[2] / "content"

@pytest.fixture
def phone(chromium, recorded_runs):
    context, page, server = stand_in_page(chromium, recorded_runs, viewport={"width": 390, "height": 844},
                                          is_mobile=True, has_touch=True, device_scale_factor=2)
    yield page
    context.close()


@pytest.fixture
def desktop(chromium, recorded_runs):
    context, page, server = stand_in_page(chromium, recorded_runs, viewport={"width": 1280, "height": 900})
    page.server = server
    yield page
    context.close()


DEMO_CHARTS = "() => [...document.querySelectorAll('.ilab-demo .ilab-calc__chart, .ilab-demo .ilab-kv__chart')]"

# A chart in a part of the demo that is hidden until a run (the primer's walk-through) shows no note: nobody sees it.
EMPTY_NOTES = f"""() => ({DEMO_CHARTS})().filter((chart) => !chart.closest('[hidden]')).map((chart) => ({{
  empty: chart.dataset.empty,
  note: getComputedStyle(chart, '::before').content,
  height: chart.getBoundingClientRect().height,
}}))"""

# Every Plotly chart on the page: inside the viewport; its title, axis titles and legend inside the figure;
# the title above the plot area; no mode bar on the title; the legend clear of the x-axis tick labels.
CHART_PROBLEMS = """() => {
  const inside = (r, box) => r.left >= box.left - 1 && r.right <= box.right + 1 && r.top >= box.top - 1
    && r.bottom <= box.bottom + 1;
  const overlap = (a, b) => a.width > 0 && b.width > 0 && a.left < b.right && b.left < a.right
    && a.top < b.bottom && b.top < a.bottom;
  const width = document.documentElement.clientWidth;
  const problems = [];
  const charts = [...document.querySelectorAll('.js-plotly-plot')];
  for (const gd of charts) {
    const name = gd.getAttribute('aria-label') || gd.id;
    const box = gd.querySelector('.main-svg').getBoundingClientRect();
    if (box.left < -1 || box.right > width + 1) problems.push([name, 'outside the viewport']);
    for (const text of gd.querySelectorAll('.gtitle, .xtitle, .x2title, .ytitle, .y2title')) {
      const r = text.getBoundingClientRect();
      if (r.width && !inside(r, box)) problems.push([name, 'clipped', text.textContent]);
    }
    const title = gd.querySelector('.gtitle');
    if (title) {
      const plotTop = box.top + gd._fullLayout._size.t;
      if (title.getBoundingClientRect().bottom > plotTop + 2) problems.push([name, 'title on the plot']);
      const bar = gd.querySelector('.modebar');
      if (bar && getComputedStyle(bar).opacity !== '0' && overlap(bar.getBoundingClientRect(), title.getBoundingClientRect())) {
        problems.push([name, 'mode bar on the title']);
      }
    }
    const legend = gd.querySelector('.legend');
    if (legend) {
      const lr = legend.getBoundingClientRect();
      if (!inside(lr, box)) problems.push([name, 'legend clipped']);
      for (const tick of gd.querySelectorAll('.xtick text, .xtitle')) {
        if (overlap(lr, tick.getBoundingClientRect())) { problems.push([name, 'legend on', tick.textContent]); break; }
      }
    }
  }
  return {charts: charts.length, problems, scrollWidth: document.scrollingElement.scrollWidth, width};
}"""


def run_every_demo(page) -> None:
    for button in page.locator(".ilab-demo .ilab-run").all():
        button.click()
    page.wait_for_function("() => [...document.querySelectorAll('.ilab-demo')].every((d) => d.dataset.state === 'done')",
                           timeout=30_000)
    page.wait_for_timeout(300)  # the last relayout


@pytest.mark.django_db(transaction=True)
def test_every_lesson_on_a_phone_notes_empty_charts_then_fits_its_charts_and_titles(live_server, phone):
    load_course(REPO_CONTENT)
    page = phone
    interactive = [m for m in Module.objects.filter(draft=False).in_course_order() if m.has_interactive]
    with_demos = [m.slug for m in interactive if m.demos]
    assert len(with_demos) >= 8
    for module in interactive:
        page.goto(f"{live_server.url}/modules/{module.slug}/")
        if module.demos:
            page.wait_for_function(f"() => ({DEMO_CHARTS})().length > 0")
            if page.locator(".demo-embed[data-reference-run]").count():
                # A lesson whose narration drives its demo shows the stored reference run in place of empty charts.
                page.wait_for_function("() => [...document.querySelectorAll('.demo-embed[data-reference-run] .ilab-demo')]"
                                       ".every((d) => d.dataset.referenceRun === 'shown')", timeout=30_000)
                page.wait_for_function(f"() => ({EMPTY_NOTES})().some((n) => n.empty === 'false')")
            else:
                # Before a first run: a note in place of bare 0–4 axes.
                notes = page.evaluate(EMPTY_NOTES)
                assert notes and all(n["empty"] == "true" and "Run the demo" in n["note"] and n["height"] > 100
                                     for n in notes), (module.slug, notes)
            run_every_demo(page)
            assert all(n["empty"] == "false" for n in page.evaluate(EMPTY_NOTES)), module.slug
        else:
            page.wait_for_function("() => document.querySelectorAll('.js-plotly-plot .main-svg').length > 0")
            page.wait_for_timeout(300)
        page.locator(".js-plotly-plot").first.hover()  # a mode bar shown on hover would show now
        found = page.evaluate(CHART_PROBLEMS)
        assert found["charts"] > 0, module.slug
        assert found["scrollWidth"] <= found["width"] == 390, (module.slug, found)
        assert found["problems"] == [], (module.slug, found["problems"])
    # The demo index, and a demo on its own page (wider than in a lesson).
    page.goto(f"{live_server.url}/demos/")
    assert page.evaluate("document.scrollingElement.scrollWidth") <= 390
    page.goto(f"{live_server.url}/demos/batching/")
    run_every_demo(page)
    found = page.evaluate(CHART_PROBLEMS)
    assert found["charts"] >= 2 and found["scrollWidth"] <= 390 and found["problems"] == [], found
    assert page.errors == [], page.errors


@pytest.mark.django_db(transaction=True)
def test_every_lesson_and_demo_page_on_a_desktop_fits_its_chart_titles_and_legends(live_server, desktop, recorded_runs):
    """At 1280 × 900, where the issue saw "…e per forward pass (red: prefill, blue: dec…" and the batching legend on
    its ticks: every chart's title, axis titles and legend inside the figure, no mode bar over a title."""
    load_course(REPO_CONTENT)
    page = desktop
    urls = [f"/modules/{m.slug}/" for m in Module.objects.filter(draft=False).in_course_order() if m.has_interactive]
    urls += [f"/demos/{name}/" for name in recorded_runs]
    for url in urls:
        page.goto(f"{live_server.url}{url}")
        page.wait_for_function("() => document.querySelectorAll('.js-plotly-plot .main-svg').length > 0"
                               " || document.querySelector('.ilab-demo .ilab-run')", timeout=30_000)
        if page.locator(".ilab-demo .ilab-run").count():
            run_every_demo(page)
        else:
            page.wait_for_timeout(300)
        page.locator(".js-plotly-plot").first.hover()
        found = page.evaluate(CHART_PROBLEMS)
        assert found["charts"] > 0, url
        assert found["scrollWidth"] <= found["width"], (url, found)
        assert found["problems"] == [], (url, found["problems"])
    assert page.errors == [], page.errors


# Parameters a demo's form does not show (sent as the spec's default or derived from another field).
NOT_ON_THE_FORM = {("kv-cache", "temperature"), ("kv-cache", "seed"), ("speculative", "seed")}

FIELD_LABELS = """() => [...document.querySelectorAll('.ilab-demo input, .ilab-demo select, .ilab-demo textarea')]
  .flatMap((c) => [...(c.labels || [])].map((l) => l.textContent.replace(/\\s+/g, ' ').trim()))"""


@pytest.mark.django_db(transaction=True)
def test_every_parameter_is_on_its_form_under_the_name_the_comparison_legend_uses(live_server, chromium):
    """The comparison legend names a changed parameter by its spec label ("Tokens drafted per round (k): 8"): the
    form's field for it carries that name (its label starts with the spec label up to any parenthesis)."""
    import re

    from demos.registry import DEMOS

    context, page, _ = stand_in_page(chromium, {}, viewport={"width": 1280, "height": 900})
    missing = []
    for name, spec in DEMOS.items():
        page.goto(f"{live_server.url}/demos/{name}/")
        page.locator(".ilab-demo .ilab-run").first.wait_for()
        labels = page.evaluate(FIELD_LABELS)
        for key, param in spec.params.items():
            head = re.split(r" \(", param.label)[0]
            if (name, key) not in NOT_ON_THE_FORM and not any(text.startswith(head) for text in labels):
                missing.append((name, key, param.label, labels))
    context.close()
    assert missing == []
    assert page.errors == [], page.errors


ANY_CHART = "() => [...document.querySelectorAll('.ilab-calc__chart, .ilab-kv__chart, .js-plotly-plot .main-svg')]"


@pytest.mark.django_db(transaction=True)
def test_charts_follow_the_window_when_it_narrows_to_a_phone(live_server, chromium):
    """A desktop window narrowed to 390 px (a phone turned, a split screen): every chart resizes into the view
    (Plotly's responsive config), none is left at its desktop width."""
    load_course(REPO_CONTENT)
    context, page, _ = stand_in_page(chromium, {}, viewport={"width": 1280, "height": 900})
    slugs = [m.slug for m in Module.objects.filter(draft=False).in_course_order() if m.has_interactive]
    for slug in slugs:
        page.set_viewport_size({"width": 1280, "height": 900})
        page.goto(f"{live_server.url}/modules/{slug}/")
        page.wait_for_function(f"() => ({ANY_CHART})().length > 0")
        page.wait_for_timeout(300)
        page.set_viewport_size({"width": 390, "height": 844})
        page.wait_for_timeout(600)
        found = page.evaluate(f"""() => ({{scroll: document.scrollingElement.scrollWidth,
          outside: ({ANY_CHART})().map((c) => c.getBoundingClientRect()).filter((r) => r.width && r.right > 391)
            .map((r) => [r.left, r.right])}})""")
        assert found["scroll"] <= 390 and found["outside"] == [], (slug, found)
    context.close()
    assert page.errors == [], page.errors


STOP_LOOK = """() => [...document.querySelectorAll('.ilab-demo button')].filter((b) => b.textContent.trim() === 'Stop')
  .map((b) => { const s = getComputedStyle(b); return {cls: b.className,
    look: [s.backgroundColor, s.color, s.borderTopColor, s.borderTopWidth, s.borderRadius, s.paddingTop, s.paddingLeft,
           s.fontSize, s.fontWeight].join(' ')}; })"""


@pytest.mark.django_db(transaction=True)
def test_every_demo_has_the_same_stop_button(live_server, desktop, recorded_runs):
    looks = {}
    for name in recorded_runs:
        desktop.goto(f"{live_server.url}/demos/{name}/")
        desktop.locator(".ilab-demo .ilab-run").first.wait_for()
        stops = desktop.evaluate(STOP_LOOK)
        assert len(stops) == 1 and "ilab-stop" in stops[0]["cls"].split(), (name, stops)
        looks[name] = stops[0]["look"]
    assert len(set(looks.values())) == 1, looks
    assert desktop.errors == []


@pytest.mark.django_db(transaction=True)
def test_a_demo_in_a_lesson_has_the_same_stop_and_run_buttons_as_on_its_own_page(live_server, chromium):
    """The lesson's styles do not restyle an embedded demo's buttons: Run and Stop look as on the demo pages."""
    load_course(REPO_CONTENT)
    context, page, _ = stand_in_page(chromium, {}, viewport={"width": 1280, "height": 900})
    run_look = STOP_LOOK.replace("'Stop'", "'Run'")
    page.goto(f"{live_server.url}/demos/kv-cache/")
    page.locator(".ilab-demo .ilab-run").first.wait_for()
    reference = (page.evaluate(STOP_LOOK)[0]["look"], page.evaluate(run_look)[0]["look"])
    lessons = [m.slug for m in Module.objects.filter(draft=False).in_course_order() if m.demos]
    looks = {}
    for slug in lessons:
        page.goto(f"{live_server.url}/modules/{slug}/")
        page.locator(".ilab-demo .ilab-run").first.wait_for()
        stops, runs = page.evaluate(STOP_LOOK), page.evaluate(run_look)
        assert stops and len(stops) == len(runs), slug
        looks[slug] = {(s["look"], r["look"]) for s, r in zip(stops, runs)}
    context.close()
    assert {slug: look for slug, look in looks.items() if look != {reference}} == {}, reference
    assert page.errors == [], page.errors


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("demo", ["prefill-decode", "kv-cache"])
def test_a_rate_limit_reads_as_a_sentence_and_counts_down_every_second(live_server, desktop, demo):
    desktop.server.refuse = {"code": "rate_limited", "message": "Too many runs in the last minute", "retry_after": 3}
    desktop.goto(f"{live_server.url}/demos/{demo}/")
    status = desktop.locator(".ilab-demo [role=status]").first
    desktop.locator(".ilab-demo .ilab-run").click()
    desktop.wait_for_function("() => document.querySelector('.ilab-demo').dataset.state === 'error'")
    seen = []
    for _ in range(40):
        text = status.inner_text()
        if not seen or seen[-1] != text:
            seen.append(text)
        if "Ready" in text:
            break
        desktop.wait_for_timeout(150)
    assert seen[:3] == [f"Error: Too many runs in the last minute. Try again in {n} s." for n in (3, 2, 1)], seen
    assert seen[-1] == "Ready: you can run the demo again.", seen
    assert desktop.server.started == [demo]
    assert desktop.errors == []
