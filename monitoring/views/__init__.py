"""Monitoring pages (surfaces): thin views over monitoring.services and the workflows domain.

One module per page family (overview, runs, inbox, letters, manage, schedules, charts,
retention, metrics), with `guards` (roles), `filters` and `decision_form` (their forms).
"""
