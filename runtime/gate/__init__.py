"""The permission gate: admission (lookup, validation, capability policy, permission),
rules, policy, workspace confinement, protected settings paths.
"""
