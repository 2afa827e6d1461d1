"""The REST API under /api/v1/: thin views over the domain, described once in routes.py.

Read routing.py first (the dispatcher every request goes through), then routes.py (the
table), then a views_*.py module. openapi.py turns the table into the served schema.
"""
