"""Demo results explained from their own numbers, against the real stack (Daphne + Celery worker + Redis):
the flash-attention default spans several tiles, a result that goes against its lesson gets a "why" note built
from the run's numbers (and a result that agrees gets none), and "What to try next" appears once a run is done."""
from __future__ import annotations

import re

import pytest

from demos.registry import DEMOS

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.timeout(600)]

STATE = "document.querySelector('.ilab-demo').dataset.state"
FINISHED = f"() => ['done','error','cancelled'].includes({STATE})"


def run_and_wait(page, stack) -> None:
    page.get_by_role("button", name="Run", exact=True).click()
    page.wait_for_function(FINISHED, timeout=240_000)
    assert page.evaluate(STATE) == "done", (page.locator(".ilab-demo [role=status]").first.inner_text(),
                                            stack.log(stack.worker)[-3000:])


def out(page, key: str) -> str:
    return page.locator(f'dd[data-out="{key}"]').inner_text()


def ms(text: str) -> float:
    """A duration the page wrote with fmtMs ("12.3 ms")."""
    assert text.strip().endswith("ms"), text
    return float(re.search(r"[\d.]+", text).group())


def why(page):
    return page.locator(".ilab-why")


def try_next(page):
    return page.get_by_role("complementary", name="What to try next")


@pytest.mark.django_db(transaction=True)
def test_flash_attention_default_shows_several_tiles_and_what_to_try_next(live_stack, demo_page):
    page = demo_page
    spec = DEMOS["flash-attention"]
    page.goto(f"{live_stack.url}/demos/flash-attention/")
    # The page's form shows the registry's defaults (one place for them).
    assert page.get_by_label("Prompt (Ctrl+Enter runs)").input_value() == spec.params["prompt"].default
    assert page.get_by_label("Tile size").input_value() == str(spec.params["block_size"].default)
    assert not try_next(page).is_visible()  # nothing to suggest before a run
    run_and_wait(page, live_stack)
    computed, skipped = (int(x) for x in out(page, "tiles").split("/"))
    assert computed >= 6 and skipped >= 3, out(page, "tiles")
    assert float(out(page, "ratio").rstrip("×")) >= 9, out(page, "ratio")
    # The times are the medians of the alternating repeats; "(within noise)" where their spreads overlap.
    times = out(page, "times")
    within_noise = times.endswith(" (within noise)")
    naive, tiled = (ms(x) for x in times.removesuffix(" (within noise)").split("/"))
    print("flash-attention:", times, why(page).inner_text() if why(page).is_visible() else "(no note)")
    if within_noise:  # nothing in time to explain
        assert not why(page).is_visible() or "Tiled took" not in why(page).inner_text()
    elif tiled > naive:  # the lesson's "faster" does not show on this CPU: the page says why, with the repeats' medians
        note = why(page).inner_text()
        assert "Tiled took" in note and f"runs {computed} small matrix products" in note, note
        assert "fits in one tile" not in note
    elif tiled < naive:
        assert not why(page).is_visible()
    box = try_next(page)
    assert box.is_visible()
    assert box.get_by_role("listitem").all_inner_texts() == list(spec.try_next)

    # A prompt inside one tile: the page says there is nothing to save, from the run's numbers.
    page.get_by_label("Prompt (Ctrl+Enter runs)").fill("The quick brown fox jumps over the lazy dog")
    page.get_by_role("button", name="Run", exact=True).click()
    page.wait_for_function(f"() => {STATE} === 'running'", timeout=30_000)
    assert not try_next(page).is_visible()  # hidden again while the next run goes
    page.wait_for_function(FINISHED, timeout=240_000)
    assert out(page, "ratio") == "1.0×" and out(page, "tiles") == "1 / 0"
    assert re.search(r"Your prompt is \d+ tokens and a tile is 16: the whole score matrix fits in one tile",
                     why(page).inner_text())
    assert not page.errors, page.errors


@pytest.mark.django_db(transaction=True)
def test_speculative_slower_than_plain_is_explained_with_acceptance_and_costs(live_stack, demo_page):
    page = demo_page
    page.goto(f"{live_stack.url}/demos/speculative/")
    page.get_by_label("Preset").select_option(label="Free text (drafts struggle)")
    page.get_by_label("New tokens").fill("16")
    run_and_wait(page, live_stack)
    speedup_text = out(page, "speedup")  # the medians of the alternating repeats, e.g. "0.38×" or "0.97× (within noise)"
    speedup = float(speedup_text.split("×")[0])
    accepted, drafted = (int(x) for x in out(page, "accept").split("/"))
    print("speculative:", speedup_text, why(page).inner_text() if why(page).is_visible() else "(no note)")
    if speedup < 1 and "within noise" not in speedup_text:
        note = why(page).inner_text()
        assert f"slower than plain decoding here ({speedup:.2f}×, medians of 3 alternating repeats)" in note, note
        assert f"only {accepted} of {drafted} guesses were accepted" in note, note
        verify_ms = out(page, "draftCost").split("/")[1].strip()  # "27.0 ms / 61.9 ms": the verify pass
        assert f"A verify pass took {verify_ms}" in note and "what plain decoding took per token" in note, note
    else:
        assert not why(page).is_visible()
    assert try_next(page).is_visible()
    assert not page.errors, page.errors


@pytest.mark.django_db(transaction=True)
def test_batching_wall_clock_against_the_lesson_is_explained_from_its_steps(live_stack, demo_page):
    page = demo_page
    page.goto(f"{live_stack.url}/demos/batching/")
    run_and_wait(page, live_stack)
    rows = {}
    for row in page.locator("table:not(.ilab-compare-timing) tbody tr").all():
        cells = [row.locator("th").inner_text(), *row.locator("td").all_inner_texts()]
        rows[cells[0]] = cells
    assert set(rows) == {"continuous", "static"}
    steps = {mode: int(cells[1]) for mode, cells in rows.items()}
    waited = {mode: int(cells[2]) for mode, cells in rows.items()}
    e2e_steps = {mode: float(cells[3]) for mode, cells in rows.items()}
    assert steps["continuous"] < steps["static"] and e2e_steps["continuous"] < e2e_steps["static"]  # the lesson, in steps
    assert waited["continuous"] < waited["static"]
    # The times are the alternating repeats' median (spread), never one streamed run's; the note follows their verdict.
    ttft_ms = {mode: ms(cells[5].split(" (")[0]) for mode, cells in rows.items()}
    assert all(t > 0 for t in ttft_ms.values()), rows
    verdict = page.locator("[data-comparison-verdict]").inner_text()
    print("batching:", rows, verdict, why(page).inner_text() if why(page).is_visible() else "(no note)")
    if "this run disagrees" in verdict:
        assert ttft_ms["continuous"] > ttft_ms["static"]
        note = why(page).inner_text()
        assert "this run went against the lesson" in note, note
        assert f"{steps['continuous']} steps against static's {steps['static']}" in note, note
        assert f"{e2e_steps['continuous']:.1f} steps from arrival" in note, note
    else:
        assert not why(page).is_visible()
    assert try_next(page).get_by_role("listitem").count() == len(DEMOS["batching"].try_next)
    assert not page.errors, page.errors
