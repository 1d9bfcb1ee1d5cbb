import sys

from fleetprobe.cli import main

if __name__ == "__main__":  # not when a worker process imports the main module
    sys.exit(main())
