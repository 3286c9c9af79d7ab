"""An OpenAI-compatible API (`/v1/chat/completions`, `/v1/completions`, `/v1/models`) on the demos' batching
service: each request is a `demos.models.Run` queued and limited like a demo run (demos.admission), run by the
worker on its `EngineService`, its tokens streamed back as server-sent events. docs/openai-api.md."""
