"""Django loads an app's models from `<app>.models`; Switchyard's live in the store layer."""

from workflows.store.models import *  # noqa: F403  (re-exported for Django's app registry only)
