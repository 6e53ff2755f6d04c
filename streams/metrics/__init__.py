"""The Prometheus metric contract: record histograms, counters read from pipeline stats,
bounded label sets and bucket bounds fit for paging."""
