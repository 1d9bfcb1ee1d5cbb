"""The HTTP face (top layer): the app factory, the per-process state, the routes."""
