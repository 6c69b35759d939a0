"""SQLite persistence of runs: see store.py for the API and schema.py for the tables."""

from .errors import DamagedDatabase, StoreError
from .queries import RunRecord
from .schema import SCHEMA_VERSION
from .store import Store, read_only_open

__all__ = ["SCHEMA_VERSION", "DamagedDatabase", "RunRecord", "Store", "StoreError", "read_only_open"]
