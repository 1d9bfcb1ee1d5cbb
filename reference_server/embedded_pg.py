"""`python -m reference_server.embedded_pg ...`: the command kept at its path; the code is
launch/embedded_pg.py."""

from .launch.embedded_pg import main

if __name__ == "__main__":
    main()
