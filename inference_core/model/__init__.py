"""What a model is: its configuration, the Transformer, its weights and tokenizer, and sampling from its logits.

The bottom layer of the engine: nothing here knows about batches, schedules or kernels.
"""
