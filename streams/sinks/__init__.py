"""Where finished records go: CSV, JSON lines, the terminal summary, OpenMetrics text and
per-directory statistics."""
