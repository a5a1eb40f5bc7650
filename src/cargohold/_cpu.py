"""One process-wide lock around pure-Python, CPU-bound work (projections, grep and query scans).

Under the GIL such work cannot run in parallel anyway, so serializing it costs no throughput; what
it buys is that at most one worker thread competes with an event loop for the GIL. Measured on the
2-core machines this project is built on: with two threads running pure Python, an asyncio loop
beside them stalls up to ~50 ms; with one, ~16 ms. Store I/O (fsync, SQLite, PostgreSQL round
trips, hashing) happens outside the lock, so async callers still overlap their disk and network
waits.
"""

from __future__ import annotations

import threading

CPU_BOUND = threading.Lock()
"""Held while a thread runs a projection or scans a whole body; never held across store I/O."""
