"""Agent loops (`llm.agent`) in the domain layer: turns and tool calls as durable steps.

`loop`: an attempt's loop (model turns, handler tools, workflow tools); `steps`: the step
log; `tools`: workflows offered as tools and a call's child run; `kind`: the node kind
registered with the runtime. Imports llm, children, runs, the runtime, the store and the core.
"""
