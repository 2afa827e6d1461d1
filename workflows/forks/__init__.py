"""Forks of runs and comparisons between runs (domain layer).

`forking`: start a new run from a node of a run, on any version of its workflow, the nodes
above carried over; `comparison`: two runs of a workflow side by side, node by node. Imports
runs, versions (a draft is frozen to fork onto it), llm (usage), the runtime, the store and
the core.
"""
