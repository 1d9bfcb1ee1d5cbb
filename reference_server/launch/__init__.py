"""Starting the server (above every layer): the command line, a child process for tests and
the harness, an embedded PostgreSQL."""
