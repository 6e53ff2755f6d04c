"""How much a partition's transaction carries at most (the worker's, worker.py), and how
many records one fetch hands the worker (BATCH_RECORDS).

Each fetch of a partition's lines is fed at once; its transaction commits once the
partition holds TRANSACTION_LINES lines not yet committed, or once the first of them was
fed TRANSACTION_AGE_S ago (or sooner: a fetch that comes back empty, a revoke, the stop).

Why across fetches: a transaction costs a few ms of the worker's CPU whatever it holds
(begin, the offsets and the commit: round trips to the broker through asyncio tasks, and
the walk of the state for its net changes): 0.3-0.45 us a line at the ~4,000 lines one
fetch brings a partition (issue 30; bench/bench_worker.py --transaction-lines 1 measures
a transaction per fetch). Fetching more at once to make transactions larger
doubled the worker's peak RSS (librdkafka holds ~470 bytes of its own a record queued);
committing across fetches does not fetch more.

What a larger transaction costs instead, and so what these bound: the records its lines
finished are held until the commit (on the bench's head-node log 1,347 records, ~0.3 MiB,
per 50,000 lines), a partition taken over (a restart, a rebalance) redoes up to that many
lines, and a record reaches its topic up to the age later than it would at once.

Here, not in worker.py: the CLI declares its options from these without importing the
Kafka clients.
"""

TRANSACTION_LINES = 50_000   # a partition's lines fed and not committed, at most
TRANSACTION_AGE_S = 1.0      # how long the first of them waits for its commit, at most

# Records one fetch hands the worker at most (all partitions together; the rest stays in
# librdkafka's bounded prefetch, lines_fetch.py). Each is a confluent_kafka.Message of
# ~0.5 KB in Python, alive until its batch is fed: 20,000 took whatever was queued
# (~6,500-14,000 of the bench's envelopes); 5,000 holds ~3 MiB fewer at the peak, which
# pays for the allocator's larger blocks kept in its arena (malloc_arenas.py), at the same
# CPU a line within bench_worker's noise (issue 30, session 25). The fixed costs of a batch
# (a consume, a wake-up of the event loop, a feed of each partition) stay ~2 % of the
# worker's CPU at 5,000.
BATCH_RECORDS = 5_000
