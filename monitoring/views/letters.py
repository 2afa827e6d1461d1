"""The dead-letter pages: groups and list, bulk replay/discard, one letter following its replay.

Thin: grouping, selection and actions are `workflows.deadletters`; replay and discard of one
letter are `workflows.runs`. A refused bulk action (no reason to discard, nothing selected)
answers the list again with the selection kept and the refusal said, never a lost form.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from controlplane import access
from monitoring.views import HtmxRequest
from monitoring.views.filters import LetterFilter
from monitoring.views.guards import requires
from workflows.runs import actions as runs, letters as deadletters
from workflows.store import texts
from workflows.store.errors import DomainError, Invalid
from workflows.store.models import AuditEntry, DeadLetter, RunEvent, Workflow

PAGE_SIZE = 50
MAX_BULK = deadletters.MAX_BULK


def list_context(flt: LetterFilter, selected: set[int] | None = None, **extra: Any) -> dict[str, Any]:
    """The dead-letter page's context: groups or one page of letters, the matching count."""
    letters = flt.apply(DeadLetter.objects.select_related("run__workflow", "resolved_by"))
    rows = list(letters.order_by("-id")[: PAGE_SIZE + 1]) if flt.view == "list" else []
    return {
        "groups": deadletters.groups(flt.for_domain()) if flt.view == "groups" else [],
        "letters": rows[:PAGE_SIZE],
        "older": rows[PAGE_SIZE - 1].pk if len(rows) > PAGE_SIZE else None,
        "matching": deadletters.matching(flt.for_domain()).count() if flt.is_open_only else None,
        "filter": flt,
        "workflows": Workflow.objects.order_by("slug").values_list("slug", flat=True),
        "selected": selected or set(),
        "nav": "deadletters",
        **extra,
    }


@require_GET
@requires("view")
def deadletters_list(request: HtmxRequest) -> HttpResponse:
    context = list_context(LetterFilter.parse(request.GET))
    template = "monitoring/fragments/deadletters_list.html" if request.htmx else "monitoring/deadletters.html"
    return render(request, template, context)


@require_POST
@requires("replay")
def deadletters_bulk(request: HttpRequest) -> HttpResponse:
    """Replay or discard the selected letters, or every open letter matching the filter.

    "Matching" first answers with a confirmation page showing how many letters match; only
    the confirmed POST (which carries that count) acts, and it acts on at most MAX_BULK.
    """
    action = request.POST.get("action")
    if action not in deadletters.ACTIONS:
        return HttpResponse("action must be replay or discard.", status=400)
    if not access.can(request.user, action):
        raise PermissionDenied(f"Your role may not {action} dead letters.")
    reason = request.POST.get("reason", "").strip()[:1000]
    flt = LetterFilter.parse(request.POST)
    matching = request.POST.get("scope") == "matching"
    ids = [int(i) for i in request.POST.getlist("ids") if i.isdigit() and len(i) < 19][:MAX_BULK]
    refusal = refusal_of(action, reason, matching, ids)
    if refusal:
        context = list_context(flt, set(ids), refusal=refusal, scope_matching=matching, reason=reason)
        return render(request, "monitoring/deadletters.html", context, status=400)
    letters: deadletters.LetterFilter | list[int] = flt.for_domain() if matching else ids
    if matching:
        count = deadletters.matching(flt.for_domain()).count()
        if request.POST.get("confirmed") != str(count):
            context = {"action": action, "count": count, "filter": flt, "reason": reason, "max": MAX_BULK}
            return render(request, "monitoring/deadletters_confirm.html", {**context, "nav": "deadletters"})
    result = deadletters.act_on_letters(action, letters, request.user, reason)
    if result.done:
        messages.success(
            request, f"{'Replayed' if action == 'replay' else 'Discarded'} {len(result.done)} dead letter(s)."
        )
    for refused in result.refused[:5]:
        messages.error(request, refused["reason"])
    return redirect(reverse("deadletters") + "?" + flt.query())


def refusal_of(action: str, reason: str, matching: bool, ids: list[int]) -> str:
    """Why a bulk action cannot go ahead as sent, or "" when it can."""
    if not matching and not ids:
        return "No dead letter was selected: tick some, or choose all matching."
    if action == "discard" and not reason:
        return "Discarding needs a reason: say why these dead letters are dropped. Your selection is kept."
    return ""


@require_GET
@requires("view")
def deadletter_detail(request: HttpRequest, letter_id: int) -> HttpResponse:
    letter = get_object_or_404(
        DeadLetter.objects.select_related("run__workflow", "node_run", "map_item", "resolved_by"),
        pk=letter_id,
    )
    attempts = RunEvent.objects.filter(run_id=letter.run_id, node_id=letter.node_id).order_by("id")
    audit = AuditEntry.objects.filter(target_type="deadletter", target_id=str(letter.pk)).order_by("-id")
    context = {
        "letter": letter,
        "attempts": attempts,
        "audit": audit,
        "outcome": outcome_of(letter),
        "unfixable": deadletters.is_unfixable_by_retry(letter),
        "nav": "deadletters",
    }
    return render(request, "monitoring/deadletter.html", context)


def outcome_of(letter: DeadLetter) -> deadletters.ReplayOutcome | None:
    return deadletters.replay_outcome(letter) if letter.status == DeadLetter.REPLAYED else None


@require_GET
@requires("view")
def deadletter_outcome(request: HttpRequest, letter_id: int) -> HttpResponse:
    """The letter's replay as it goes: polled by the letter page until the node settles."""
    letter = get_object_or_404(DeadLetter, pk=letter_id)
    context = {"letter": letter, "outcome": outcome_of(letter)}
    return render(request, "monitoring/fragments/deadletter_outcome.html", context)


@require_POST
@requires("replay")
def deadletter_replay(request: HttpRequest, letter_id: int) -> HttpResponse:
    """Replay as is, or with the edited input of the form's `input` field (JSON) if sent."""
    try:
        edited = edited_input(request.POST.get("input"))
        run = runs.replay_dead_letter(letter_id, request.user, edited)
        how = " with edited input" if edited is not None else ""
        # Said of the act, not of the run's state: by the time the page shows it the run may
        # have finished; the replay's outcome below follows it live.
        messages.success(
            request,
            f"Dead letter {letter_id} replayed{how}: run {run.pk} took its node up again; "
            "the outcome below follows it.",
        )
    except DomainError as exc:
        messages.error(request, str(exc))
    return redirect("deadletter_detail", letter_id=letter_id)


@require_POST
@requires("discard")
def deadletter_discard(request: HttpRequest, letter_id: int) -> HttpResponse:
    try:
        runs.discard_dead_letter(letter_id, request.POST.get("reason", "")[:1000], request.user)
        messages.success(request, f"Dead letter {letter_id} discarded.")
    except DomainError as exc:
        messages.error(request, str(exc))
    return redirect("deadletter_detail", letter_id=letter_id)


def edited_input(text: str | None) -> Any:
    """The JSON of a replay form's input field; None when the field was not sent."""
    if text is None:
        return None
    try:
        value = texts.parse_json(text)
    except ValueError as exc:  # nesting past the recursion limit included
        raise Invalid(f"input is not valid JSON: {exc}; nothing was replayed.") from None
    bad = texts.first_bad_text(value)
    if bad is not None:
        where = texts.loc_path(("input", *bad))
        raise Invalid(
            f"{where} must not contain NUL characters or unpaired surrogates; nothing was replayed."
        )
    return value
