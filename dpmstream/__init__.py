"""dpmstream: streaming log analytics for the CERN Disk Pool Manager (DPM)."""

__version__ = "0.1.0"
