"""Serving metrics named as vLLM names them: per request (TTFT, TPOT, ITL, e2e) and per run (throughputs, KV use);
what one forward step costs, estimated from the model's shape (for the roofline)."""
from __future__ import annotations

import statistics

from ..model.config import ModelConfig


def step_cost(cfg: ModelConfig, n_new: int, n_context: int, bytes_per_value: int,
              kv_cached: bool) -> tuple[float, float]:
    """(FLOPs, bytes moved) estimate for one forward of `n_new` tokens over `n_context` positions, one logits row."""
    body = cfg.matmul_params() - cfg.vocab_size * cfg.dim
    flops = 2.0 * body * n_new + 2.0 * cfg.vocab_size * cfg.dim
    pairs = n_new * n_context - (n_new * (n_new - 1)) / 2  # causal: query i sees context − n_new + i + 1 keys
    flops += cfg.n_layers * 4.0 * cfg.n_heads * cfg.head_dim * pairs
    weight_bytes = cfg.matmul_params() * bytes_per_value
    kv_read = cfg.kv_bytes_per_token(bytes_per_value) * (n_context if kv_cached else 0)
    return flops, float(weight_bytes + kv_read)


def request_metrics(req) -> dict:
    """A `request.Request`'s figures, as vLLM defines them: TTFT from arrival; TPOT = (e2e − TTFT)/(n − 1); ITL gaps."""
    times = req.token_times
    ttft = times[0] - req.arrival_time if times else None
    e2e = (req.finished_time or (times[-1] if times else req.arrival_time)) - req.arrival_time
    n = len(times)
    tpot = (e2e - ttft) / (n - 1) if n > 1 and ttft is not None else 0.0
    return {"ttft_s": ttft, "tpot_s": tpot, "e2e_s": e2e, "itl_s": [b - a for a, b in zip(times, times[1:])],
            "queue_s": (req.first_scheduled_time - req.arrival_time) if req.first_scheduled_time else None}


def _summary(values: list[float], name: str) -> dict:
    if not values:
        return {}
    vs = sorted(values)
    p99 = vs[min(len(vs) - 1, int(round(0.99 * (len(vs) - 1))))]
    return {f"mean_{name}_ms": 1000 * statistics.fmean(vs), f"median_{name}_ms": 1000 * statistics.median(vs),
            f"p99_{name}_ms": 1000 * p99}


def run_metrics(sched) -> dict:
    """Run-level metrics named as `vllm bench serve` prints them, plus KV-pool figures."""
    done = [r for r in sched.finished if r.finish_reason != "aborted"]
    out: dict = {"mode": sched.cfg.mode, "completed": len(done), "num_steps": sched.step_count}
    if not done:
        return out
    start = min(r.arrival_time for r in done)
    end = max(r.finished_time for r in done)
    duration = max(end - start, 1e-9)
    n_in = sum(len(r.prompt_ids) for r in done)
    n_out = sum(len(r.output_ids) for r in done)
    per = [request_metrics(r) for r in done]
    out.update({
        "duration_s": duration, "total_input_tokens": n_in, "total_output_tokens": n_out,
        "request_throughput": len(done) / duration, "output_throughput": n_out / duration,
        "total_token_throughput": (n_in + n_out) / duration, "num_preemptions": sched.num_preemptions,
    })
    out.update(_summary([m["ttft_s"] for m in per if m["ttft_s"] is not None], "ttft"))
    out.update(_summary([m["tpot_s"] for m in per if len(m["itl_s"]) > 0], "tpot"))
    out.update(_summary([x for m in per for x in m["itl_s"]], "itl"))
    out.update(_summary([m["e2e_s"] for m in per], "e2el"))
    stats = sched.step_stats
    if stats:
        alloc = sum(s["slots_allocated"] for s in stats)
        filled = sum(s["slots_filled"] for s in stats)
        out["kv_waste_pct"] = 100 * (alloc - filled) / alloc if alloc else 0.0
        for key in ("request_max", "model_max"):
            reserved = sum(s[f"reserved_{key}"] for s in stats)
            out[f"contiguous_{key}_waste_pct"] = 100 * (reserved - filled) / reserved if reserved else 0.0
        out["kv_usage_mean"] = statistics.fmean(s["blocks_used"] for s in stats) / sched.cfg.num_blocks
        out["kv_usage_peak"] = max(s["blocks_used"] for s in stats) / sched.cfg.num_blocks
        out["mean_batch_size"] = statistics.fmean(s["n_seqs"] for s in stats)
        out["mean_tokens_per_step"] = statistics.fmean(s["n_tokens"] for s in stats)
    out["blocks_free_at_end"] = sched.allocator.num_free
    if sched.prefix is not None:
        out.update({"prefix_cache_queries": sched.prefix.query_tokens, "prefix_cache_hits": sched.prefix.hit_tokens,
                    "prefix_cache_hit_rate": sched.prefix.hit_rate})
    return out
