"""`python -m reference_server ...`: the server's command line, kept at the package's face;
the code is launch/cli.py."""

from .launch.cli import main

if __name__ == "__main__":
    main()
