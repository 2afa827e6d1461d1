"""Provider health, shared by every worker: breakers, request/token rates, and the attempts held behind them (domain layer).

`policy`: a provider's limits and breaker settings as the gate reads them; `breaker`: one
circuit breaker per (provider, model), its state a Redis hash changed by Lua scripts, each
of its decisions a row in PostgreSQL (rebuilt from there when Redis lost it); `rates`: the
requests- and tokens-per-minute windows per provider, in Redis; `holds`: attempts held
behind a breaker or a rate (a Wait of kind "provider"), released by priority when it
clears; `gate`: the call gate (runtime/admission.py) that checks both before each LLM call;
`manage`: what the providers page and the API read and the operators' forced decisions.
Imports the runtime, the store and the core; never workflows/llm (which imports it not
either: the llm handler reaches it through the admission seam).
"""
