"""Tables, indexes and migrations of the evotui SQLite database.

`PRAGMA user_version` holds the schema version; `PRAGMA application_id` marks the file as ours so
another program's SQLite file is refused instead of being written into.
"""

from __future__ import annotations

SCHEMA_VERSION = 9
# "evot" as a big-endian 32-bit integer, the SQLite convention for application ids.
APPLICATION_ID = int.from_bytes(b"evot", "big")

# Child rows name their run; deleting a run removes them (ON DELETE CASCADE, foreign_keys=ON).
_RUN_FK = "run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE"

_V1: tuple[str, ...] = (
    """CREATE TABLE runs (
        run_id TEXT PRIMARY KEY,
        task TEXT NOT NULL,
        task_path TEXT,
        config_json TEXT NOT NULL DEFAULT '{}',
        seed INTEGER,
        mode TEXT,
        policy TEXT,
        backend TEXT,
        status TEXT NOT NULL,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        rng_state_json TEXT,
        counters_json TEXT,
        pool_version INTEGER NOT NULL DEFAULT 0,
        summary_json TEXT
    )""",
    "CREATE INDEX runs_by_created ON runs(created_at)",
    f"""CREATE TABLE artifacts (
        {_RUN_FK},
        artifact_id TEXT NOT NULL,
        text TEXT NOT NULL,
        status TEXT NOT NULL,
        parent_ids_json TEXT NOT NULL DEFAULT '[]',
        created_version INTEGER NOT NULL,
        val_mean REAL,
        val_scores_json TEXT,
        minibatch_json TEXT,
        created_at REAL NOT NULL,
        meta_json TEXT NOT NULL DEFAULT '{{}}',
        PRIMARY KEY (run_id, artifact_id)
    )""",
    "CREATE INDEX artifacts_by_version ON artifacts(run_id, created_version)",
    f"""CREATE TABLE lineage (
        {_RUN_FK},
        parent_id TEXT NOT NULL,
        child_id TEXT NOT NULL,
        operator TEXT NOT NULL,
        created_at REAL NOT NULL
    )""",
    "CREATE INDEX lineage_by_child ON lineage(run_id, child_id)",
    f"""CREATE TABLE evaluations (
        {_RUN_FK},
        artifact_id TEXT NOT NULL,
        example_id TEXT NOT NULL,
        split TEXT NOT NULL,
        score REAL,
        feedback TEXT,
        stage TEXT,
        created_at REAL NOT NULL
    )""",
    "CREATE INDEX evaluations_by_artifact ON evaluations(run_id, artifact_id)",
    f"""CREATE TABLE pool_events (
        {_RUN_FK},
        version INTEGER NOT NULL,
        kind TEXT NOT NULL,
        artifact_id TEXT,
        detail_json TEXT NOT NULL DEFAULT '{{}}',
        created_at REAL NOT NULL,
        PRIMARY KEY (run_id, version)
    )""",
    f"""CREATE TABLE items (
        {_RUN_FK},
        item_id TEXT NOT NULL,
        created_version INTEGER NOT NULL,
        parent_artifact_id TEXT,
        stage TEXT,
        payload_json TEXT NOT NULL DEFAULT '{{}}',
        outcome TEXT,
        error TEXT,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        PRIMARY KEY (run_id, item_id)
    )""",
    "CREATE INDEX items_by_outcome ON items(run_id, outcome)",
    f"""CREATE TABLE item_stages (
        {_RUN_FK},
        item_id TEXT NOT NULL,
        stage TEXT NOT NULL,
        version_at_consume INTEGER,
        gap INTEGER,
        enqueued_at REAL,
        started_at REAL,
        finished_at REAL,
        outcome TEXT
    )""",
    "CREATE INDEX item_stages_by_item ON item_stages(run_id, item_id)",
    f"""CREATE TABLE llm_calls (
        {_RUN_FK},
        endpoint TEXT NOT NULL,
        url TEXT,
        model TEXT,
        stage TEXT,
        status TEXT NOT NULL,
        finish_reason TEXT,
        prompt_tokens INTEGER NOT NULL DEFAULT 0,
        completion_tokens INTEGER NOT NULL DEFAULT 0,
        latency_s REAL,
        ttft_s REAL,
        retries INTEGER NOT NULL DEFAULT 0,
        error TEXT,
        item_id TEXT,
        created_at REAL NOT NULL
    )""",
    "CREATE INDEX llm_calls_by_run ON llm_calls(run_id, stage)",
    f"""CREATE TABLE staleness (
        {_RUN_FK},
        item_id TEXT NOT NULL,
        stage TEXT NOT NULL,
        policy TEXT,
        gap INTEGER,
        item_version INTEGER,
        pool_version INTEGER,
        decision TEXT NOT NULL,
        reason TEXT,
        created_at REAL NOT NULL
    )""",
    "CREATE INDEX staleness_by_run ON staleness(run_id, stage)",
)

# v2: human review decisions, and the tokens and detail of staleness decisions (reflection).
_V2: tuple[str, ...] = (
    f"""CREATE TABLE reviews (
        {_RUN_FK},
        item_id TEXT NOT NULL,
        gate TEXT NOT NULL,
        decision TEXT NOT NULL,
        reason TEXT,
        edited INTEGER NOT NULL DEFAULT 0,
        created_at REAL NOT NULL
    )""",
    "CREATE INDEX reviews_by_item ON reviews(run_id, item_id)",
    "ALTER TABLE staleness ADD COLUMN tokens INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE staleness ADD COLUMN detail_json TEXT",
)

# v3: the driver lease of each run (engine/store/lease.py): one process drives a run at a time.
_V3: tuple[str, ...] = (
    """CREATE TABLE leases (
        run_id TEXT PRIMARY KEY REFERENCES runs(run_id) ON DELETE CASCADE,
        token TEXT NOT NULL,
        pid INTEGER NOT NULL,
        host TEXT NOT NULL,
        pid_started TEXT,
        acquired_at REAL NOT NULL,
        heartbeat_at REAL NOT NULL
    )""",
)

# v4: the text of every LLM request and response (engine/store/blobs.py). Texts live once each in
# `blobs`, keyed by the sha256 of their canonical bytes and zlib-compressed; a call names them by
# blob id (an integer, a few bytes, where a 32-byte hash per message doubled the text's cost):
# request_blobs_json is the JSON list of its messages' blob ids, in order (one blob per message,
# so the system prompt that consecutive requests share is stored once), response_blob the
# response text's. Both NULL for calls recorded before v4 or with [store] keep_llm_text = false;
# response_blob also for failed and cancelled calls. No foreign keys: ids inside JSON cannot have
# one, and a delete of blobs would scan llm_calls per row (Store.delete_run collects orphans).
# artifacts.components_json: a multi-component artifact's parts; NULL = one component, `text`.
_V4: tuple[str, ...] = (
    """CREATE TABLE blobs (
        id INTEGER PRIMARY KEY,
        hash BLOB NOT NULL UNIQUE CHECK (length(hash) = 32),
        size INTEGER NOT NULL,
        data BLOB NOT NULL
    )""",
    "ALTER TABLE llm_calls ADD COLUMN request_blobs_json TEXT",
    "ALTER TABLE llm_calls ADD COLUMN response_blob INTEGER",
    "ALTER TABLE artifacts ADD COLUMN components_json TEXT",
)

# v5: the edit-type judge's answers (engine/trace/analyze/edits.py), keyed by the sha256 of the
# judge prompt's version, the judge model and the diff, so a second `evotui analyze` of the same
# edits asks no LLM. Not per run: the same diff in two runs (or an imported copy) is judged once.
_V5: tuple[str, ...] = (
    """CREATE TABLE judge_labels (
        key TEXT PRIMARY KEY,
        model TEXT NOT NULL,
        labels_json TEXT NOT NULL,
        invalid_answers INTEGER NOT NULL DEFAULT 0,
        created_at REAL NOT NULL
    )""",
)

# v6: the audit trail of audited strategies (SEPL, engine/strategy/sepl.py; engine/stages/audit.py):
# one row per transition of a proposal (reflect, select, improve, evaluate, commit), rejected
# ones kept. `component` is the component the proposal changes (NULL for a one-string artifact);
# detail_json holds the record (evidence, hypothesis, proposal, evaluation, ...).
_V6: tuple[str, ...] = (
    f"""CREATE TABLE audit (
        {_RUN_FK},
        item_id TEXT NOT NULL,
        transition TEXT NOT NULL,
        component TEXT,
        decision TEXT NOT NULL,
        reason TEXT,
        detail_json TEXT NOT NULL DEFAULT '{{}}',
        created_at REAL NOT NULL
    )""",
    "CREATE INDEX audit_run_item ON audit (run_id, item_id)",
)

# v7: operator steering of a live run (engine/steering/): one row per act, in order (act_id). Acts
# are guide / unguide / pin / unpin / ban / unban / reeval (who asked in `by`) and the engine's
# own "use" rows (a proposal that was shown a guidance or took a pinned parent), so a resumed run
# rebuilds exactly the guidance, pins and bans it had, with the proposals they have left.
_V7: tuple[str, ...] = (
    f"""CREATE TABLE steering (
        {_RUN_FK},
        act_id INTEGER NOT NULL,
        act TEXT NOT NULL,
        target TEXT,
        text TEXT,
        count INTEGER,
        item_id TEXT,
        by TEXT NOT NULL,
        detail_json TEXT NOT NULL DEFAULT '{{}}',
        created_at REAL NOT NULL,
        PRIMARY KEY (run_id, act_id)
    )""",
)

# v8: prompt tokens a call's server served from its prompt cache (OpenAI's
# usage.prompt_tokens_details.cached_tokens), priced at the model's cached rate (engine/costs/spend.py).
_V8: tuple[str, ...] = (
    "ALTER TABLE llm_calls ADD COLUMN cached_tokens INTEGER NOT NULL DEFAULT 0",
)

# v9: the island migrations of island strategies (loongflow; contextevolve with island selection),
# written by the ledger (engine/ledger.py) as the run's island fold makes them
# (engine/selection/islands.py): when (pool_version, the commit that set it off; at_commit, the
# fold's count of live artifacts), between which islands, the migrants new to the target
# (artifact_ids_json, possibly []), and the trigger: "diversity" with both islands' diversity and
# the threshold their difference exceeded, or "interval". The key makes a write idempotent: a
# resumed run's rebuilt fold offers its earlier migrations again and they are kept once.
_V9: tuple[str, ...] = (
    f"""CREATE TABLE migrations (
        {_RUN_FK},
        pool_version INTEGER NOT NULL,
        at_commit INTEGER NOT NULL,
        from_island INTEGER NOT NULL,
        to_island INTEGER NOT NULL,
        artifact_ids_json TEXT NOT NULL DEFAULT '[]',
        trigger TEXT NOT NULL,
        from_diversity REAL,
        to_diversity REAL,
        threshold REAL,
        interval INTEGER NOT NULL,
        created_at REAL NOT NULL,
        PRIMARY KEY (run_id, at_commit, from_island, to_island)
    )""",
)

# MIGRATIONS[i] brings a database from version i to version i + 1. Append, never edit old entries.
MIGRATIONS: tuple[tuple[str, ...], ...] = (_V1, _V2, _V3, _V4, _V5, _V6, _V7, _V8, _V9)
assert len(MIGRATIONS) == SCHEMA_VERSION

RUN_COLUMNS: tuple[str, ...] = (
    "run_id", "task", "task_path", "config_json", "seed", "mode", "policy", "backend", "status",
    "created_at", "updated_at", "rng_state_json", "counters_json", "pool_version", "summary_json",
)

# Tables whose rows `Store.fetch_rows` returns, with the order that matches how they were written.
ROW_ORDER: dict[str, str] = {
    "runs": "rowid",
    "artifacts": "created_version, rowid",
    "lineage": "rowid",
    "evaluations": "rowid",
    "pool_events": "version",
    "items": "rowid",
    "item_stages": "rowid",
    "llm_calls": "rowid",
    "staleness": "rowid",
    "reviews": "rowid",
    "audit": "rowid",
    "steering": "act_id",
    "migrations": "at_commit, rowid",
}


def pending_migrations(current: int) -> tuple[tuple[str, ...], ...]:
    """Statements that bring a database at `current` up to SCHEMA_VERSION, one tuple per step."""
    return MIGRATIONS[current:]
