"""The REST API under /api/v1/, on django-ninja: thin views over the domain services.

Read api.py first (the NinjaAPI: its routers, parser, document and problem handlers), then
a views_*.py module (one router per noun; the decorators there are the route table), then
auth.py (API key or browser session, rate limit, access.py's decision). schema.py adds to
ninja's OpenAPI document what integrators rely on; errors.py is the one error format.
"""
