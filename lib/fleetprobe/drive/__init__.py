"""Driving runs, above the experiments and the analysis: one registered experiment through its
lifecycle (`run`), the runs a plan file lists, in parallel processes (`batch`, with `sweeps`
expanding seeds and swept params into runs), and a recorded run's verdicts again from its
history, with no server (`judge`). `fleetprobe.reproduction` and the command line stand above.
"""
