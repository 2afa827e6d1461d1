"""Child runs: `workflow.run` nodes start another workflow as a run of its own (domain layer).

`start`: a ready node waits and its child starts; `calls`: which workflows call which, checked
at save, publish and activation; `kind`: the node kind registered with the runtime. A child's
end reaching its parent is the runtime's (runtime/parents.py). Imports the runtime, the
store and the core.
"""
