"""Monitoring services (domain layer): what the pages and /metrics read, and the broadcaster.

`broadcaster` pushes coalesced snapshots to Channels groups (`events` is the one publisher);
`sources`, `counters`, `snapshots`, `stats`: what is in flight; `runstate`: a run as its page
shows it; `tracing`: spans and OTLP export; `charts`; `livetext`: streamed LLM text. Imports
the workflows domain, the runtime, the store and the core; never a view.
"""
