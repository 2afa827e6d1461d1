"""Events that start runs: topics and the workflows subscribed to them (subscriptions.py),
publishing events to topics, idempotent on each event's (source, id) (publishing.py), and the
kept events: search, replay to a subscription, retention (archive.py). A domain package:
imports the runs package (bulk starts), the store and the core (`core/topics.py`,
`core/cloudevents.py`). Events posted on a *key* wake waiting nodes instead (`workflows/waits`).
"""
