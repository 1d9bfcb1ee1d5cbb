"""The seeded world that the `matrix` and `dynamics` experiments share, below both: tenants
with confusable fleet names, agents at every trust level, rows of every visibility and
status (`plan`); what a run learns on the wire (`wire`); the world made on a target
(`build`, `moved`) and the target's own account of it (`census`); the probe of every path
(`probes`) and how its answers read (`answers`); what a target allows (`target`).

An experiment imports this room, never another experiment.
"""
