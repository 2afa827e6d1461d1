"""Schedules: runs started by the clock (domain layer).

`timetable`: managed by editors, fired by schedulers (a duty registered with the runtime).
Imports runs, the store and the core.
"""
