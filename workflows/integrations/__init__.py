"""What other programs hold: API keys and webhooks (domain layer).

`keys`: create, verify, revoke; `webhooks`: signed inbound triggers and signed outbound
deliveries (a duty registered with the runtime). Imports runs, versions, the store and the core.
"""
