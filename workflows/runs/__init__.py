"""Runs and what people do to them (domain layer).

`actions`: start, pause, cancel, replay and discard; `rerun`: re-run from a node; `letters`:
dead letters in bulk; `bulk`: runs in bulk; `search`: finding runs; `mapitems`: a map
node's items as people read them; `tracecontext`: a caller's W3C trace. Imports the
runtime, the store and the core.
"""
