"""One rank of the model-parallelism demo (`demos/catalog/tensor_parallel.py` spawns two): the engine's own
`Transformer` code, holding only this rank's part of the weights, and the communication that makes it exact.

Imports torch and the engine's model only (no Django): a spawned process starts from this module.

Tensor parallelism (Megatron-LM's split). SmolLM2-135M has 9 query heads reading 3 key/value heads, and 9 does not
split in two, so attention is split by key/value group, unevenly: rank 0 takes groups 0 and 1 (query heads 0–5),
rank 1 group 2 (query heads 6–8). A group's query, key and value rows of W_qkv are column-parallel (each rank
computes its heads' outputs from the whole input, no communication), and W_o is row-parallel (each rank multiplies
its heads' outputs by its slice of W_o's columns, giving a partial sum of the full output): one all-reduce adds the
partial sums. The MLP is the same: W_gate and W_up column-parallel, W_down row-parallel, one all-reduce. The MLP's
columns are split so that each rank holds about as many weights as the other (rank 1, with fewer heads, takes more
MLP columns). Embeddings, norms and the vocabulary head are replicated: both ranks pick the same token.

Pipeline parallelism: rank 0 holds layers 0–14, rank 1 layers 15–29 and the head; rank 0's hidden state is sent to
rank 1, rank 1's token back to rank 0. One request: one stage works while the other waits (the bubble).
"""
from __future__ import annotations

import os
import time

import torch
import torch.distributed as dist
from torch import nn

from inference_core.model.kv_cache import sdpa
from inference_core.model.transformer import Transformer, rope_table

WORLD_SIZE = 2
COLUMN_ALIGN = 64  # MLP shards in whole multiples of 64 columns


def device_and_backend(rank: int) -> tuple[torch.device, str]:
    """NCCL on one GPU per rank where there are enough GPUs; gloo on the CPU otherwise."""
    if torch.cuda.is_available() and torch.cuda.device_count() >= WORLD_SIZE:
        return torch.device("cuda", rank), "nccl"
    return torch.device("cpu"), "gloo"


def tensor_plan(n_kv_heads: int, group_size: int, head_dim: int, dim: int, ffn_dim: int) -> list[dict]:
    """Which key/value groups and MLP columns each rank holds: groups dealt as evenly as they go (the first ranks
    take the extra), then MLP columns so that each rank's weights come as close to half as 64-column steps allow."""
    per_rank = [n_kv_heads // WORLD_SIZE + (r < n_kv_heads % WORLD_SIZE) for r in range(WORLD_SIZE)]
    starts = [sum(per_rank[:r]) for r in range(WORLD_SIZE)]
    groups = [list(range(s, s + n)) for s, n in zip(starts, per_rank)]
    group_weights = dim * head_dim * (2 * group_size + 2)  # its query and output rows, one key and one value head
    column_weights = 3 * dim  # a gate column, an up column, a down row
    total = n_kv_heads * group_weights + ffn_dim * column_weights
    cols0 = (total / WORLD_SIZE - len(groups[0]) * group_weights) / column_weights
    cols0 = int(round(cols0 / COLUMN_ALIGN)) * COLUMN_ALIGN
    columns = [(0, cols0), (cols0, ffn_dim)]
    return [{"rank": r, "kv_groups": groups[r],
             "query_heads": [h for g in groups[r] for h in range(g * group_size, (g + 1) * group_size)],
             "ffn_columns": list(columns[r]),
             "weights": len(groups[r]) * group_weights + (columns[r][1] - columns[r][0]) * column_weights}
            for r in range(WORLD_SIZE)]


def tensor_shards(model: Transformer, plan: dict) -> dict[str, torch.Tensor]:
    """This rank's weights: the replicated ones, and each layer's slices (copies: the engine's stay as they are)."""
    cfg, hd = model.config, model.config.head_dim
    q_rows = [r for h in plan["query_heads"] for r in range(h * hd, (h + 1) * hd)]
    kv_rows = [r for g in plan["kv_groups"] for r in range(g * hd, (g + 1) * hd)]
    k0, v0 = cfg.n_heads * hd, (cfg.n_heads + cfg.n_kv_heads) * hd
    qkv_rows = torch.tensor(q_rows + [k0 + r for r in kv_rows] + [v0 + r for r in kv_rows])
    lo, hi = plan["ffn_columns"]
    gate_up_rows = torch.cat([torch.arange(lo, hi), cfg.ffn_dim + torch.arange(lo, hi)])
    shards = {}
    for name, tensor in model.state_dict().items():
        if name == "output.weight" and cfg.tie_embeddings:
            continue  # the embeddings' own tensor: built tied again
        w = tensor.detach()
        if ".attention.wqkv." in name:
            w = w.index_select(0, qkv_rows)
        elif ".attention.wo." in name:
            w = w.index_select(1, torch.tensor(q_rows))
        elif ".feed_forward.w_gate_up." in name:
            w = w.index_select(0, gate_up_rows)
        elif ".feed_forward.w_down." in name:
            w = w[:, lo:hi]
        shards[name] = w.contiguous().clone()
    return shards


def pipeline_shards(model: Transformer, rank: int, split: int) -> dict[str, torch.Tensor]:
    """Stage 0: the embeddings and layers [0, split); stage 1: layers [split, n), the final norm and the head."""
    keep = range(0, split) if rank == 0 else range(split, model.config.n_layers)
    out = {}
    for name, tensor in model.state_dict().items():
        if name.startswith("layers."):
            if int(name.split(".")[1]) not in keep:
                continue
        elif rank == 0 and not name.startswith("tok_embeddings."):
            continue
        elif rank == 1 and name.startswith("tok_embeddings.") and model.config.tie_embeddings:
            continue  # stage 1 reads the same tensor as its head: `output.weight`
        out[name] = tensor.detach().clone()
    return out


class Communication:
    """Seconds spent in collectives this step, and how many: the all-reduces' wait for the other rank included."""

    def __init__(self) -> None:
        self.seconds, self.calls = 0.0, 0

    def timed(self, fn, *args):
        start = time.perf_counter()
        fn(*args)
        self.seconds += time.perf_counter() - start
        self.calls += 1


class RowParallelLinear(nn.Module):
    """This rank's columns of W (its rows of Wᵀ): a partial sum of the full product, made whole by an all-reduce."""

    def __init__(self, weight: torch.Tensor, comm: Communication) -> None:
        super().__init__()
        self.weight, self.comm = nn.Parameter(weight, requires_grad=False), comm

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        partial = nn.functional.linear(x, self.weight)
        self.comm.timed(dist.all_reduce, partial)
        return partial


class StageInput(nn.Module):
    """Stage 1's stand-in for the embeddings: the hidden state stage 0 sends."""

    def __init__(self, dim: int, dtype: torch.dtype, device: torch.device, comm: Communication) -> None:
        super().__init__()
        self.dim, self.dtype, self.device, self.comm = dim, dtype, device, comm
        self.weight = torch.empty(0, dtype=dtype)  # the forward reads the embeddings' dtype for its RoPE tables

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        hidden = torch.empty(*tokens.shape, self.dim, dtype=self.dtype, device=self.device)
        self.comm.timed(dist.recv, hidden, 0)
        return hidden


class GrowingCache:
    """A contiguous K/V cache per layer (one sequence): appends the new tokens' keys and values, attends over all."""

    def __init__(self) -> None:
        self.kv: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

    def attend(self, layer, q, k, v):
        if layer in self.kv:
            k, v = (torch.cat([old, new], dim=2) for old, new in zip(self.kv[layer], (k, v)))
        self.kv[layer] = (k, v)
        return sdpa(q, k, v)

    def advance(self, n_tokens: int) -> None:
        pass


def _param(t: torch.Tensor, device) -> nn.Parameter:
    return nn.Parameter(t.to(device), requires_grad=False)


def build_rank_model(cfg, weights: dict, rank: int, mode: str, plan: dict | None, split: int, device,
                     comm) -> Transformer:
    """The engine's Transformer with this rank's weights put in place: no weights of the others' allocated."""
    with torch.device("meta"):
        model = Transformer(cfg)
    model.rope_cos, model.rope_sin = (t.to(device) for t in rope_table(cfg))
    for name, tensor in weights.items():
        *path, leaf = name.split(".")
        module = model.get_submodule(".".join(path))
        setattr(module, leaf, _param(tensor, device))
    if cfg.tie_embeddings and "output.weight" not in weights and "tok_embeddings.weight" in weights:
        model.output.weight = model.tok_embeddings.weight
    dtype = next(iter(weights.values())).dtype
    if mode == "tensor":
        for block in model.layers:
            block.attention.n_heads = len(plan["query_heads"])
            block.attention.n_kv_heads = len(plan["kv_groups"])
            block.attention.wo = RowParallelLinear(block.attention.wo.weight, comm)
            block.feed_forward.ffn_dim = plan["ffn_columns"][1] - plan["ffn_columns"][0]
            block.feed_forward.w_down = RowParallelLinear(block.feed_forward.w_down.weight, comm)
    elif rank == 1:
        model.layers = model.layers[split:]
        model.tok_embeddings = StageInput(cfg.dim, dtype, device, comm)
    else:
        model.layers = model.layers[:split]
    return model


def _decode(model, cfg, rank, mode, prompt_ids, max_new, device, comm, report) -> None:
    cache = GrowingCache()
    tokens = torch.tensor([prompt_ids], device=device)
    pos, step = 0, 0
    while step < max_new:  # step 0 is the prefill, which picks the first token
        comm.seconds, comm.calls = 0.0, 0
        start = time.perf_counter()
        positions = torch.arange(pos, pos + tokens.shape[1], device=device)
        token = torch.zeros(1, dtype=torch.long, device=device)
        if mode == "tensor" or rank == 1:
            logits = model(tokens, positions, cache, last_only=True)
            token[0] = int(logits[0, -1].argmax())
        else:
            hidden = model.hidden_states(tokens, positions, cache)
            comm.timed(dist.send, hidden.contiguous(), 1)
        if mode == "pipeline":
            comm.timed(dist.send if rank == 1 else dist.recv, token, 0 if rank == 1 else 1)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        wall = time.perf_counter() - start
        report({"rank": rank, "step": step, "token_id": int(token[0]), "n_tokens": tokens.shape[1], "wall_s": wall,
                "comm_s": comm.seconds, "compute_s": max(wall - comm.seconds, 0.0), "collectives": comm.calls})
        pos += tokens.shape[1]
        step += 1
        if int(token[0]) == cfg.eos_token_id:
            break
        tokens = token.view(1, 1)


def rank_main(rank: int, port: int, mode: str, cfg, weights: dict, plan: dict | None, split: int,
              prompt_ids: list[int], max_new: int, queue) -> None:
    """One process: join the group on a localhost port, decode greedily, report each step on `queue`."""
    torch.set_num_threads(1)  # two ranks on two cores: one thread each, or they fight over the cores
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    device, backend = device_and_backend(rank)
    try:
        dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=WORLD_SIZE)
        comm = Communication()
        model = build_rank_model(cfg, weights, rank, mode, plan, split, device, comm)
        del weights
        queue.put(("ready", rank, {"backend": backend, "device": str(device)}))
        with torch.inference_mode():
            _decode(model, cfg, rank, mode, prompt_ids, max_new, device, comm,
                    lambda row: queue.put(("step", rank, row)))
        queue.put(("done", rank, {}))
    except Exception as exc:  # the parent ends the run with this message and stops the other rank
        queue.put(("error", rank, {"message": f"{type(exc).__name__}: {exc}"}))
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
