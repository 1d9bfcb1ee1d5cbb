"""Standalone helpers at the ground floor, each importing nothing of the kit: cache
directories (`caches`), a run's target label (`labels`), quiet notebook execution
(`notebooks`, `python -m fleetprobe.base.notebooks`) and the lock files' agreement
(`lockfile`, `python -m fleetprobe.base.lockfile`).
"""
