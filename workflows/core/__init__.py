"""The pure layer: graph, definition schema and validation, edge conditions, engine, diff.

Standard library, pydantic and jsonschema only: the same code runs in Daphne, the scheduler
and every worker, and is tested in milliseconds (tests/unit/test_layers.py keeps it so).
"""
