"""What a model is: its configuration, the Transformer, its weights and tokenizer, and sampling from its logits."""
