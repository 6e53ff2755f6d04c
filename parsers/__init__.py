"""Pure parsing domain: regex profiles, line parsing, event time and request reassembly.

Nothing here does I/O beyond reading the bundled profile files.
"""
