"""The store: PostgreSQL, the source of truth (layer 2 of docs/architecture.md).

Owns the models, the parsed graphs of published versions (`graphs`), the run history writer
(`history`), JSON size checks (`payloads`), the audit trail and the errors a person can act
on. Imports the core only.
"""
