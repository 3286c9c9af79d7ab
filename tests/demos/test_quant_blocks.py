"""The quantization demo's block-by-block event (demos/catalog/quantization.py `blocks_event`), from the real
model's weights: every walked block is what the format's own quantizer made of it (its scale, its largest error,
where its weights landed), an outlier flag means a weight beyond 6 × the matrix's rms set the scale, and the
event stays small enough to send."""
from __future__ import annotations

import json

import pytest

from demos.catalog.quantization import blocks_event, layer_event, projection_weight
from inference_core import validate_event

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def model(loaded_models):
    from inference_core import DEFAULT_MODEL

    return loaded_models.get(DEFAULT_MODEL).model


@pytest.mark.parametrize("fmt,projection,group", [("int4-g128", "w_down", 128), ("nf4", "wqkv", 64),
                                                  ("int8", "w_gate_up", 576), ("fp8", "wo", 576)])
def test_every_walked_block_is_what_the_format_made_of_it(model, fmt, projection, group):
    import torch

    from inference_core.quant.linears import quantize_linear

    ev = validate_event(blocks_event(model, fmt, 3, projection).to_dict())
    w = projection_weight(model, 3, projection)
    deq = quantize_linear(w, fmt).dequantize()
    rows, k = w.shape
    assert ev["group"] == group and ev["n_blocks"] == rows * -(-k // group)
    assert len(json.dumps(ev)) < 40_000
    walk = ev["walk"]
    assert 16 <= len(walk) <= 24 and [b["absmax"] for b in walk] == sorted(b["absmax"] for b in walk)
    assert walk[-1]["absmax"] == pytest.approx(float(w.abs().max()))  # the walk ends on the largest weight's block
    rms = float(w.pow(2).mean().sqrt())
    assert ev["weight_rms"] == pytest.approx(rms)
    levels = torch.tensor(ev["levels"])
    for b in walk:
        values, after = w[b["row"], b["start"]:b["end"]], deq[b["row"], b["start"]:b["end"]]
        assert len(values) == b["end"] - b["start"] == sum(b["hist_counts"]) == sum(b["level_counts"])
        assert b["absmax"] == pytest.approx(float(values.abs().max())) and abs(b["top_value"]) == b["absmax"]
        assert b["max_error"] == pytest.approx(float((after - values).abs().max()), rel=1e-5, abs=1e-9)
        assert b["outlier"] == (b["absmax"] > 6 * rms)
        # Every dequantized weight is a level × the block's scale, counted under that level.
        landed = torch.bincount((after[:, None] / b["scale"] - levels).abs().argmin(dim=1), minlength=len(levels))
        assert landed.tolist() == b["level_counts"]
        assert float((after[:, None] / b["scale"] - levels).abs().min(dim=1).values.max()) < 1e-3
    assert ev["n_outlier_blocks"] >= sum(b["outlier"] for b in walk)
    assert len(ev["sample_absmax"]) == len(ev["sample_max_error"]) >= len(walk)


def test_the_layer_histogram_after_counts_every_weight_on_the_same_edges(model):
    ev = validate_event(layer_event(model, "int4-g32", 3, "w_down").to_dict())
    assert sum(ev["dequant_hist_counts"]) == sum(ev["hist_counts"]) == 576 * 1536
    # Rounded onto few levels, the weights pile up: the tallest bar after is taller than before.
    assert max(ev["dequant_hist_counts"]) > max(ev["hist_counts"])
