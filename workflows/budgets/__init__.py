"""Spend budgets on LLM calls, checked before the money is spent (domain layer).

`ledger`: which budgets cover a call, its reservation and settlement in PostgreSQL; `gate`:
the admission gate the runtime calls before each LLM call (runtime/admission.py); `holds`:
attempts held by a budget, offered again when their reason clears; `manage`: budgets as
people create, change and read them, and the refusal of runs at start. Imports the llm
package (prices), the runtime, the store and the core.
"""
