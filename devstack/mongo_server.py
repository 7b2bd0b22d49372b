"""The local MongoDB stand-in (SecantusDB), run as Ragline needs it: transactions left open end
after 10 s, and its retryable-write records are pruned oldest first.

- A process killed in the middle of a transaction leaves it open on the server, and every other
  write to its documents waits until the server ends it: after its lifetime,
  `transactionLifetimeLimitSeconds` on MongoDB (60 s by default). Ragline's transactions last
  milliseconds, so production lowers the limit (docs/production.md) and the local stack does
  the same. SecantusDB takes the limit only as an argument of its server class, not on its
  command line, so this runs its command line with that argument's default changed.
- The server keeps the reply of every retryable write for 30 minutes, at most 10,000 of them
  (as MongoDB does, so that a driver's retry is answered, not applied twice). SecantusDB
  prunes them on every retryable write by walking all of them and, once it holds 10,000,
  sorting all of them: one client's writes went from 0.86 ms to 6 ms (p50) over 24,000 writes
  (`benchmarks/mongo_aging.py`, alone), and the soak's uploads from about 45 ms to 200 ms. Here
  the records are kept in the order they were written and pruned from the oldest, by the same
  two rules, at a cost of the records dropped.

The other arguments are `secantusd-py`'s:

    python -m devstack.mongo_server --host 127.0.0.1 --port PORT --storage-path DIR
"""

from __future__ import annotations

import functools
import sys
from collections import OrderedDict
from typing import Any

from secantus import cli, transactions
from secantus.server import SecantusDBServer
from secantus.transactions import TransactionRegistry

# Seconds a transaction may stay idle before the server aborts it (SecantusDB counts idle
# time; MongoDB counts from the start, docs/production.md).
TRANSACTION_LIFETIME_S = 10.0


def _kept_in_order(init: Any) -> Any:
    """`TransactionRegistry.__init__`, with its retryable-write records in write order."""

    @functools.wraps(init)
    def wrapped(self: TransactionRegistry, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        self._retryable = OrderedDict(self._retryable)

    return wrapped


def prune_oldest_first(self: TransactionRegistry) -> None:
    """Drops the retryable-write records past their lifetime and those over the cap, from the
    oldest: SecantusDB's rules, at the cost of the records dropped. (Records are stored as they
    are written, so the oldest come first; one written again keeps its place, and is dropped
    no later than it would have been.)"""
    records: OrderedDict[tuple[bytes, int], tuple[dict[str, Any], float, bytes]]
    records = self._retryable
    cutoff = self._time() - transactions._RETRYABLE_RECORD_LIFETIME_SECONDS
    cap = transactions._RETRYABLE_RECORD_MAX
    while records:
        _reply, stored_at, _identity = next(iter(records.values()))
        if stored_at >= cutoff and len(records) <= cap:
            return
        records.popitem(last=False)


def patch_standin() -> None:
    """Runs SecantusDB with Ragline's transaction lifetime and retryable-write pruning."""
    SecantusDBServer.__init__ = functools.partialmethod(
        SecantusDBServer.__init__, transaction_lifetime_seconds=TRANSACTION_LIFETIME_S
    )
    TransactionRegistry.__init__ = _kept_in_order(TransactionRegistry.__init__)
    TransactionRegistry._prune_retryable_locked = prune_oldest_first


def main() -> int:
    patch_standin()
    code: int = cli.main(sys.argv[1:])
    return code


if __name__ == "__main__":
    sys.exit(main())
