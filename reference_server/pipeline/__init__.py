"""The write and search paths as named steps, contradiction detection, embedding, the
latency model and background rows (above governance)."""
