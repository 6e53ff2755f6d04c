"""Pure parsing domain: regex profiles, line parsing, event time and request reassembly.

Nothing here does I/O beyond reading the bundled profile files (and keeping their
parsed TOML beside them: profiles.read_bundled_profile_file).
"""
