"""The local MongoDB stand-in (SecantusDB), with transactions left open ended after 10 s.

A process killed in the middle of a transaction leaves it open on the server, and every other
write to its documents waits until the server ends it: after its lifetime,
`transactionLifetimeLimitSeconds` on MongoDB (60 s by default). Ragline's transactions last
milliseconds, so production lowers the limit (docs/production.md) and the local stack does
the same. SecantusDB takes the limit only as an argument of its server class, not on its
command line, so this runs its command line with that argument's default changed; the other
arguments are `secantusd-py`'s.

    python -m devstack.mongo_server --host 127.0.0.1 --port PORT --storage-path DIR
"""

from __future__ import annotations

import functools
import sys

from secantus import cli
from secantus.server import SecantusDBServer

# Seconds a transaction may stay idle before the server aborts it (SecantusDB counts idle
# time; MongoDB counts from the start, docs/production.md).
TRANSACTION_LIFETIME_S = 10.0


def main() -> int:
    SecantusDBServer.__init__ = functools.partialmethod(
        SecantusDBServer.__init__, transaction_lifetime_seconds=TRANSACTION_LIFETIME_S
    )
    code: int = cli.main(sys.argv[1:])
    return code


if __name__ == "__main__":
    sys.exit(main())
