"""Every schema the API names is named once: django-ninja keys its OpenAPI components by class
name, so two response types of one name (a provider health beside the service's health) made
one of them document the other's fields."""

from __future__ import annotations

import importlib
import pkgutil
from collections import defaultdict

from pydantic import BaseModel
from typing_extensions import is_typeddict

import workflows.api


def test_no_two_api_schemas_share_a_name() -> None:
    defined: dict[str, set[str]] = defaultdict(set)
    for info in pkgutil.iter_modules(workflows.api.__path__):
        module = importlib.import_module(f"workflows.api.{info.name}")
        for name, value in vars(module).items():
            if not isinstance(value, type) or getattr(value, "__module__", "") != module.__name__:
                continue
            if is_typeddict(value) or (issubclass(value, BaseModel) and value is not BaseModel):
                defined[name].add(module.__name__)
    shared = {name: sorted(where) for name, where in defined.items() if len(where) > 1}
    assert not shared, f"schema names defined in more than one module: {shared}"
