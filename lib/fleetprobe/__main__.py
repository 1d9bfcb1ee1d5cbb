import sys

from fleetprobe.cli import main

sys.exit(main())
