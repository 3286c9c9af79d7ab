"""Record a lesson's reference run: one run of a demo's real runner, stored in the course content
(content/runs/<demo>.json) in the shape of a shared run's trace, so the lesson's narration can replay it
through the demo and move its timeline (see "Narration that drives a demo" in the format reference).

    python scripts/record_reference_run.py kv-cache '{"prompt": "…", "max_new_tokens": 12}' --step-events token

`--step-events` names the event types of which the demo's timeline makes one step each; their count is stored
as `steps`, the range a narration marker's step is checked against (the browser test
tests/browser/test_narration_drives_demo.py checks the demo's timeline agrees).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from datetime import datetime, timezone
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("demo")
    parser.add_argument("params", nargs="?", default="{}", help="the demo's params, a JSON object")
    parser.add_argument("--step-events", required=True, help="comma-separated event types, one step each")
    parser.add_argument("--out", help="where to write (default: content/runs/<demo>.json)")
    args = parser.parse_args(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "inferencelab.settings")
    import django

    django.setup()
    from django.conf import settings

    from demos.registry import DEMOS, validate
    from demos.versions import engine_version
    from workers.serving import LoadedModels

    params = validate(args.demo, json.loads(args.params))
    started = datetime.now(timezone.utc)
    events = json.loads(json.dumps(list(DEMOS[args.demo].load_runner()(params, models=LoadedModels()))))
    kinds = {kind.strip() for kind in args.step_events.split(",") if kind.strip()}
    first = next((ev for ev in events if ev.get("type") == "run_started"), {})
    last = next((ev for ev in reversed(events) if ev.get("type") == "run_finished"), {})
    record = {
        "demo": args.demo, "params": params, "status": "done", "reference": True,
        "steps": sum(1 for ev in events if ev.get("type") in kinds),
        "header": {"type": "header", "demo": args.demo, "mode": "live", "model": settings.ENGINE_MODEL,
                   "device": first.get("device") or platform.processor() or None, "dtype": first.get("dtype"),
                   "engine_version": engine_version(), "measured_at": started.isoformat()},
        "summary": {k: v for k, v in last.items() if k != "type"},
        "events": events,
    }
    out = Path(args.out or Path(settings.CONTENT_DIR) / "runs" / f"{args.demo}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"{out}: {len(events)} events, {record['steps']} steps")
    return 0


if __name__ == "__main__":
    sys.exit(main())
