"""Nodes that wait: approvals, events, timers (domain layer).

`waiting`: entering a wait, events, deadlines, escalation; `approvals`: decisions, who may,
the inbox; `kind`: the wait kinds registered with the runtime. Imports runs, the runtime, the
store and the core.
"""
