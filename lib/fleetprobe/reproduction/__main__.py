"""`python -m fleetprobe.reproduction notebooks [TRACES [OUT]]` (what `make notebooks` runs)."""

from fleetprobe.reproduction.driver import main

raise SystemExit(main())
