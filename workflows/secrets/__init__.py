"""Secrets: set, delete, list and rotate them (catalog.py); which definitions use them, and the
save-time check that each one referenced exists (usage.py). A domain package: imports the
store (where values are sealed, `workflows/store/secrets.py`) and the core (`secretrefs`).
A value comes in through `set_secret` and never goes out of this package: only the worker
reveals one, at call time.
"""
