"""The SQL of the store's batched write ops: each table's column list and its INSERT (or
upsert) statement, keyed by op name.

Kept apart from store.py, which checks and converts arguments and enqueues ops: the column
order here is the order of every op's parameters, so statement and columns live side by side.
"""

from __future__ import annotations

from .schema import RUN_COLUMNS


def _insert(table: str, columns: tuple[str, ...], *, upsert_key: tuple[str, ...] = (),
            keep: tuple[str, ...] = ()) -> str:
    sql = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
    if upsert_key:
        updates = [c for c in columns if c not in upsert_key and c not in keep]
        sql += (f" ON CONFLICT ({', '.join(upsert_key)}) DO UPDATE SET "
                + ", ".join(f"{c} = excluded.{c}" for c in updates))
    return sql


RUN_INSERT_COLS = ("run_id", "task", "task_path", "config_json", "seed", "mode", "policy", "backend",
                   "status", "created_at", "updated_at")
ARTIFACT_COLS = ("run_id", "artifact_id", "text", "status", "parent_ids_json", "created_version",
                 "val_mean", "val_scores_json", "minibatch_json", "created_at", "meta_json",
                 "components_json")
LINEAGE_COLS = ("run_id", "parent_id", "child_id", "operator", "created_at")
EVAL_COLS = ("run_id", "artifact_id", "example_id", "split", "score", "feedback", "stage", "created_at")
POOL_COLS = ("run_id", "version", "kind", "artifact_id", "detail_json", "created_at")
ITEM_COLS = ("run_id", "item_id", "created_version", "parent_artifact_id", "stage", "payload_json",
             "outcome", "error", "created_at", "updated_at")
STAGE_COLS = ("run_id", "item_id", "stage", "version_at_consume", "gap", "enqueued_at", "started_at",
              "finished_at", "outcome")
CALL_COLS = ("run_id", "endpoint", "url", "model", "stage", "status", "finish_reason", "prompt_tokens",
             "completion_tokens", "latency_s", "ttft_s", "retries", "error", "item_id", "created_at",
             "cached_tokens")
STALE_COLS = ("run_id", "item_id", "stage", "policy", "gap", "item_version", "pool_version",
              "decision", "reason", "created_at", "tokens", "detail_json")
REVIEW_COLS = ("run_id", "item_id", "gate", "decision", "reason", "edited", "created_at")
AUDIT_COLS = ("run_id", "item_id", "transition", "component", "decision", "reason", "detail_json", "created_at")
MIGRATION_COLS = ("run_id", "pool_version", "at_commit", "from_island", "to_island", "artifact_ids_json", "trigger",
                  "from_diversity", "to_diversity", "threshold", "interval", "created_at")
STEERING_COLS = ("run_id", "act_id", "act", "target", "text", "count", "item_id", "by", "detail_json", "created_at")

SQL = {
    "insert_run": _insert("runs", RUN_INSERT_COLS),
    "upsert_artifact": _insert("artifacts", ARTIFACT_COLS, upsert_key=("run_id", "artifact_id"),
                               keep=("created_at",)),
    "insert_lineage": _insert("lineage", LINEAGE_COLS),
    "insert_evaluations": _insert("evaluations", EVAL_COLS),
    "insert_pool_event": _insert("pool_events", POOL_COLS),
    "upsert_item": _insert("items", ITEM_COLS, upsert_key=("run_id", "item_id"), keep=("created_at",)),
    "insert_item_stage": _insert("item_stages", STAGE_COLS),
    "insert_staleness": _insert("staleness", STALE_COLS),
    "insert_review": _insert("reviews", REVIEW_COLS),
    "insert_audit": _insert("audit", AUDIT_COLS),
    "insert_steering": _insert("steering", STEERING_COLS),
    # OR IGNORE: a resumed run's rebuilt island fold offers its earlier migrations again.
    "insert_migration": _insert("migrations", MIGRATION_COLS).replace("INSERT INTO", "INSERT OR IGNORE INTO", 1),
    "delete_run": "DELETE FROM runs WHERE run_id = ?",
    "put_judge_labels": ("INSERT OR REPLACE INTO judge_labels (key, model, labels_json, invalid_answers, created_at) "
                         "VALUES (?, ?, ?, ?, ?)"),
}
UPDATABLE_RUN_COLS = frozenset(RUN_COLUMNS) - {"run_id"}
"""The runs columns update_run may set."""
