"""Workflows, their versions and drafts (domain layer).

`publish`: create, validate, publish, activate, import, export; `drafts`: in-place edits with
optimistic locking; `catalog`: the catalog as people change it, audited; `editing`: what the
browser editor needs beyond these. Imports children (calls), llm (providers), the runtime
(publishing announces on the bus), the store and the core.
"""
