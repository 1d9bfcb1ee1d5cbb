"""What the runs are judged by, pure and independent of any server: the written governance
policy (`policy`, its tables a data file, `policy.yaml`, read by `policy_file`) and the
history checkers of the `faults` experiment (`checkers`), functions of recorded events only.
It imports nothing of the kit outside this room.
"""
