"""Source code of the demo's sample services, commit by commit (pure data; `demo.services` builds repos).

Each service is a list of commits; a commit is a message and the files it writes. The bugs are real:
the Python one is executed to get its tracebacks, the Java and Go traces are built from these lines.
"""

from demo.sources.checkout import CHECKOUT_SERVICE
from demo.sources.commit import CommitSpec
from demo.sources.orders import ORDERS_SERVICE
from demo.sources.payments import PAYMENTS_SERVICE

__all__ = ["CHECKOUT_SERVICE", "ORDERS_SERVICE", "PAYMENTS_SERVICE", "CommitSpec"]
