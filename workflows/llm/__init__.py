"""LLM calls: named providers, the OpenAI-compatible client, usage and cost, the demo server.

`providers.resolve` turns a node's provider and model into an `Endpoint` (URL and key stay
server-side); `client.complete` makes one call, streamed or not, tool calls included, to an OpenAI-compatible
provider or, for a provider of another kind, through the module registered for that kind
(`anthropic_messages.py`, registered by workflows/apps.py);
`usage.record_call` writes one `LLMCall` row per call with its tokens and cost. A domain
package: imports the runtime (the handler registry, the bus), the store and the core.
"""
