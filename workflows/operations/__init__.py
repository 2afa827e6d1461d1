"""What operators do to the fleet: workers (drain, pause) and retention (domain layer).

Imports the runtime and the store.
"""
