"""The serving loop, in nano-vllm's shape: `LLMEngine.step()` asks the `Scheduler` for a batch, the `ModelRunner`
runs one forward over the paged KV pool, and the step's tokens go back to their requests as trace events."""
