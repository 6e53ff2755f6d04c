"""A discrete-event model of a DPM head node that writes a log and its ground truth."""
