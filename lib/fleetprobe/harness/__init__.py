"""What an experiment is made of and runs on, below the experiments and the shared world: the
`Experiment` base, its params and the registry (`experiment`), where requests go (`targets`),
the run directory and its events (`trace`), agent identities on targets without key
provisioning (`identities`), the faults injected while a run is in progress (`nemesis`), and
the seed-fixed random streams, names and per-run salt every plan is drawn from (`seeding`).
"""
