"""A student's lab table: for each configuration, their own finished live runs of it, newest first, and per metric
the median and spread (min–max) of the newest `repeats`, with what measured them.

Only runs the student started count: their owners (`demos.identity.owners_for_request`), finished (`done`), and not
replays (`replay_of` set: another run's numbers). A run belongs to a row when its stored params (the cleaned params
its `start` stored) equal the row's, with today's defaults filled into both (a parameter added since is the same
default on both sides). Rows with the same params and different sides read the same runs: one run measures both.
"""
from __future__ import annotations

import json
import statistics
from collections.abc import Sequence

from demos.models import Run, RunEvent
from demos.registry import get_spec

from .metrics import metrics_for

# The newest runs of the demo read per request: far more than any lab's rows × repeats, and a bound on the work.
SCAN_LIMIT = 300


def params_key(spec, params: dict) -> str:
    return json.dumps(spec.with_defaults(params if isinstance(params, dict) else {}), sort_keys=True)


def lab_metrics(lab: dict) -> list[str]:
    """The metrics the lab shows: its own first, then those its questions ask about."""
    names = [lab["metric"]]
    for question in lab["questions"]:
        if question.get("metric") and question["metric"] not in names:
            names.append(question["metric"])
    return names


def lab_table(lab: dict, owners: Sequence[str]) -> dict:
    spec = get_spec(lab["demo"])
    metrics = metrics_for(spec.name)
    names = [n for n in lab_metrics(lab) if n in metrics]
    keys = {c["id"]: params_key(spec, c["params"]) for c in lab["configs"]}
    runs = list(Run.objects.filter(demo=spec.name, owner__in=list(owners), replay_of__isnull=True,
                                   status__in=(Run.Status.DONE, *Run.ACTIVE))
                .order_by("-created_at").only("id", "params", "status", "device", "dtype", "engine_version",
                                              "model", "created_at")[:SCAN_LIMIT]) if owners else []
    by_key: dict[str, list[Run]] = {}
    for run in runs:
        by_key.setdefault(params_key(spec, run.params), []).append(run)
    done_ids = [r.id for k in set(keys.values()) for r in by_key.get(k, []) if r.status == Run.Status.DONE]
    events: dict = {}
    for row in RunEvent.objects.filter(run_id__in=done_ids, type__in={metrics[n].event for n in names}).values(
            "run_id", "type", "event"):
        events[(row["run_id"], row["type"])] = row["event"]
    rows = [_row(config, by_key.get(keys[config["id"]], []), events, names, metrics, lab["repeats"])
            for config in lab["configs"]]
    for row in rows:
        row["shares_runs_with"] = [c["id"] for c in lab["configs"]
                                   if c["id"] != row["id"] and keys[c["id"]] == keys[row["id"]]]
    missing = [{"id": r["id"], "label": r["label"], "runs": r["runs"]} for r in rows if not r["complete"]]
    return {"lab": lab["id"], "demo": spec.name, "repeats": lab["repeats"], "metric": lab["metric"],
            "metrics": {n: metrics[n].describe(n) for n in names}, "rows": rows, "complete": not missing,
            "missing": missing}


def _row(config: dict, runs: list[Run], events: dict, names: list[str], metrics: dict, repeats: int) -> dict:
    used: list[tuple[Run, dict[str, float]]] = []
    for run in runs:
        if run.status != Run.Status.DONE:
            continue
        values = {}
        for name in names:
            event = events.get((run.id, metrics[name].event))
            value = metrics[name].read(event, config["side"]) if isinstance(event, dict) else None
            if value is not None:
                values[name] = value
        if names[0] not in values:
            continue  # a finished run without the lab's figure (an older trace): not a measurement of this row
        used.append((run, values))
        if len(used) == repeats:
            break
    stats = {}
    for name in names:
        values = [v[name] for _, v in used if name in v]
        if values:
            stats[name] = {"median": statistics.median(values), "min": min(values), "max": max(values),
                           "n": len(values)}
    latest = used[0][0] if used else None
    setups = {(r.device, r.dtype, r.engine_version) for r, _ in used}
    return {
        "id": config["id"], "label": config["label"], "side": config["side"], "params": config["params"],
        "runs": len(used), "needed": repeats, "complete": len(used) >= repeats,
        "active": sum(r.status in Run.ACTIVE for r in runs),
        "run_ids": [str(r.id) for r, _ in used], "values": [v for _, v in used], "stats": stats,
        "device": latest.device if latest else "", "dtype": latest.dtype if latest else "",
        "engine_version": latest.engine_version if latest else "", "model": latest.model if latest else "",
        "mixed_setup": len(setups) > 1,
    }
