"""URLs of the events pages (the kept events, one event, a workflow's topics), included at the
root by controlplane.urls."""

from __future__ import annotations

from django.urls import path

from workflows.pages import views_events

app_name = "events"

urlpatterns = [
    path("events/", views_events.events_page, name="list"),
    path("events/<int:event_id>/", views_events.event_page, name="detail"),
    path("events/hooks/", views_events.create_hook, name="create_hook"),
    path("events/hooks/<uuid:hook_id>/delete/", views_events.delete_hook, name="delete_hook"),
    path("events/<int:event_id>/replay/", views_events.replay_event, name="replay"),
    path("workflows/<slug:slug>/topics/", views_events.workflow_topics, name="workflow_topics"),
    path("workflows/<slug:slug>/topics/unsubscribe/", views_events.unsubscribe, name="unsubscribe"),
]
