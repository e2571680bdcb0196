from tests.support.ledger import db

__all__ = ["db"]
