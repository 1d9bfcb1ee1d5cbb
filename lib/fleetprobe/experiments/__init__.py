"""One module per experiment. Importing this package imports every module in it, so a
module that decorates its class with `fleetprobe.harness.experiment.register` is runnable by name
(`python -m fleetprobe run <name>`) without editing this file."""

import importlib
import pkgutil

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")
