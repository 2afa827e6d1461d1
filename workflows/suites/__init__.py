"""Regression suites of a workflow (domain layer).

`building`: suites and their cases, written by hand, from recent or picked runs, or from a
JSONL upload; `running`: a suite run against a draft or a version (its cases start as
ordinary runs, low priority, replaying their origins' calls); `evaluation`: the one place a
suite run is judged, once, when its last case run has ended (a scheduler duty); `gate`: a
draft's publish refused while a required suite has not passed on it. The checks themselves
are pure (core/expectations.py). Imports runs, versions, forks (the comparison), llm (the
judge's call), the runtime, the store and the core.
"""
