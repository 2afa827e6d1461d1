"""Fake external services for tests and the demo (real sockets, no mocks)."""
