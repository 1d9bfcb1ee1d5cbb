"""fleetprobe's reference server: a MemClaw wire-compatible governed memory service with
selectable behaviour profiles (see README.md)."""

__version__ = "0.1.0"
