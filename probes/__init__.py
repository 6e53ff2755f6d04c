"""Nagios probes."""
