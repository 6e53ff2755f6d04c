"""How much a partition's transaction carries at most (the worker's, worker.py).

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
