"""Following live log files exactly once (`dpmstream run`): tail -F, rotation, the
registry of offsets and the saved reassembly state."""
