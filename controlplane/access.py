"""Who may do what: the one place that decides, for pages, the API and websockets.

People have a role, held as membership of the Django group of that name (superusers are
admins); roles are ordered, each includes the ones before it. API keys carry scopes
instead. Every action names the least role and the scope it needs.

    viewer    see workflows, runs, traces, dead letters, metrics
    operator  + start, cancel runs; re-run from a node; fork a run; run a suite; replay and discard dead letters;
              post events; pause and resume schedules, run a schedule now; force a provider's breaker
              open or closed
    (anyone with a role may decide the approvals their node names them for: approvals.can_decide)
    editor    + create and change versions, publish, activate (roll back)
    admin     + API keys, users, workflow deletion, webhook triggers and subscriptions,
              LLM providers and prices
    editor    + create and change versions, publish, activate (roll back); schedules; suites
    admin     + API keys, users, workflow deletion, webhook triggers and subscriptions
              draining and pausing workers; spend budgets (and a held call let over one); secrets (set and delete; never read back); MCP servers

An API key acts for its owner: it may do what its scopes allow *and* its owner's role allows
(`api_key_can`), so a key never outlives a demotion or does more than the person holding it.
"""

from __future__ import annotations

from typing import Any

VIEWER, OPERATOR, EDITOR, ADMIN = "viewer", "operator", "editor", "admin"
ROLES = (VIEWER, OPERATOR, EDITOR, ADMIN)

# action -> (least role of a person, scope an API key needs)
ACTIONS: dict[str, tuple[str, str]] = {
    "view": (VIEWER, "read"),
    # Who decides a given approval is narrowed further by its node (approvals.can_decide).
    "decide_approval": (VIEWER, "operate"),
    "post_event": (OPERATOR, "run"),
    "start_run": (OPERATOR, "run"),
    "cancel_run": (OPERATOR, "operate"),
    "replay": (OPERATOR, "operate"),
    "discard": (OPERATOR, "operate"),
    "rerun_node": (OPERATOR, "operate"),
    # A fork starts a run (workflows/forks/); onto a draft it also needs "publish" (a snapshot).
    "fork_run": (OPERATOR, "run"),
    "pause_workflow": (OPERATOR, "operate"),
    # A suite run starts runs (workflows/suites/); on a draft it also needs "publish" (a snapshot).
    "run_suite": (OPERATOR, "run"),
    "manage_suites": (EDITOR, "edit"),  # create suites, add cases, mark one required to publish
    # Pause and resume a schedule, as a workflow (creating, changing, deleting: manage_schedules).
    "operate_schedules": (OPERATOR, "operate"),
    "force_breaker": (OPERATOR, "operate"),  # force an LLM provider's breaker open or closed
    "edit": (EDITOR, "edit"),
    "publish": (EDITOR, "edit"),
    "manage_schedules": (EDITOR, "edit"),
    "manage_subscriptions": (EDITOR, "edit"),  # a workflow's topic subscriptions
    "manage_keys": (ADMIN, "admin"),
    "delete_workflow": (ADMIN, "admin"),
    "manage_webhooks": (ADMIN, "admin"),
    "manage_retention": (ADMIN, "admin"),
    "manage_llm": (ADMIN, "admin"),  # LLM providers (their keys) and the price table
    "manage_workers": (ADMIN, "admin"),
    "manage_budgets": (ADMIN, "admin"),  # spend budgets, and allowing a held call over one
    "manage_secrets": (ADMIN, "admin"),  # set (write-only), delete, read the history of secrets
    "manage_mcp": (ADMIN, "admin"),  # register, delete MCP servers and list their tools again
}
SCOPES = ("read", "run", "edit", "operate", "admin")


def role_of(user: Any) -> str | None:
    """Return the user's highest role, or None for anonymous or role-less users."""
    if user is None or not getattr(user, "is_authenticated", False) or not user.is_active:
        return None
    if user.is_superuser:
        return ADMIN
    names = set(user.groups.values_list("name", flat=True))
    held = [r for r in ROLES if r in names]
    return held[-1] if held else None


def has_role(user: Any, least: str) -> bool:
    role = role_of(user)
    return role is not None and ROLES.index(role) >= ROLES.index(least)


def can(user: Any, action: str) -> bool:
    """Return whether a person may perform `action` (a key of ACTIONS)."""
    return has_role(user, ACTIONS[action][0])


def role_can(role: str | None, action: str) -> bool:
    """Return whether a holder of `role` (None: no role) may perform `action`."""
    return role is not None and ROLES.index(role) >= ROLES.index(ACTIONS[action][0])


def key_can(scopes: list[str] | tuple[str, ...], action: str) -> bool:
    """Return whether an API key with these scopes may perform `action`; admin implies all."""
    needed = ACTIONS[action][1]
    return needed in scopes or "admin" in scopes


def api_key_can(key: Any, action: str) -> bool:
    """Return whether an API key may perform `action`: its scopes and its owner's role must allow it."""
    return key_can(key.scopes, action) and can(key.owner, action)
