"""The database schema as an ordered list of migrations, applied on open (``PRAGMA user_version``).

Static results are stored one row per (benchmark, model) as packed vectors aligned with the benchmark's item
positions (``items.pos``): int8 with -1 for a missing cell, or int32 successes/trials for pass@k rollouts. A
5,000 x 14,000 matrix is then 5,000 rows of 14 kB that load into numpy with one ``np.frombuffer`` each,
instead of 70 M SQL rows (DESIGN.md, "Scale"). Everything else is ordinary relational rows.
"""

from __future__ import annotations

# The words of an item's metadata JSON for the search index: its string and number values (keys are field names,
# not content); a metadata text that is not valid JSON is indexed as it is rather than failing the write.
_META_WORDS = ("CASE WHEN json_valid({m}) THEN coalesce((SELECT group_concat(value, ' ') FROM json_tree({m})"
               " WHERE type IN ('text', 'integer', 'real')), '') ELSE {m} END")

MIGRATIONS: list[str] = [
    # 1: the whole first schema
    """
    CREATE TABLE benchmarks (
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL UNIQUE,
        kind TEXT NOT NULL DEFAULT 'static' CHECK (kind IN ('static', 'arena', 'mixed')),
        description TEXT NOT NULL DEFAULT '',
        metadata TEXT NOT NULL DEFAULT '{}',
        created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now'))
    );
    CREATE TABLE items (
        id INTEGER PRIMARY KEY,
        benchmark_id INTEGER NOT NULL REFERENCES benchmarks(id) ON DELETE CASCADE,
        pos INTEGER NOT NULL,
        key TEXT NOT NULL,
        text TEXT NOT NULL DEFAULT '',
        answer TEXT NOT NULL DEFAULT '',
        grp TEXT NOT NULL DEFAULT '',
        kind TEXT NOT NULL DEFAULT 'static' CHECK (kind IN ('static', 'arena')),
        chance REAL,
        origin TEXT NOT NULL DEFAULT 'original' CHECK (origin IN ('original', 'benchfill', 'derived')),
        parent_id INTEGER REFERENCES items(id) ON DELETE SET NULL,
        status TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'retired')),
        metadata TEXT NOT NULL DEFAULT '{}',
        created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now')),
        UNIQUE (benchmark_id, key),
        UNIQUE (benchmark_id, pos)
    );
    CREATE TABLE models (
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL UNIQUE,
        family TEXT,
        owner TEXT,
        metadata TEXT NOT NULL DEFAULT '{}'
    );
    CREATE TABLE model_aliases (
        alias TEXT PRIMARY KEY,
        model_id INTEGER NOT NULL REFERENCES models(id) ON DELETE CASCADE
    );
    CREATE TABLE benchmark_models (
        benchmark_id INTEGER NOT NULL REFERENCES benchmarks(id) ON DELETE CASCADE,
        model_id INTEGER NOT NULL REFERENCES models(id) ON DELETE CASCADE,
        pos INTEGER NOT NULL,
        PRIMARY KEY (benchmark_id, model_id),
        UNIQUE (benchmark_id, pos)
    );
    CREATE TABLE static_results (
        benchmark_id INTEGER NOT NULL REFERENCES benchmarks(id) ON DELETE CASCADE,
        model_id INTEGER NOT NULL REFERENCES models(id) ON DELETE CASCADE,
        n INTEGER NOT NULL,
        correct BLOB,
        successes BLOB,
        trials BLOB,
        PRIMARY KEY (benchmark_id, model_id)
    );
    CREATE TABLE arena_rewards (
        item_id INTEGER NOT NULL REFERENCES items(id) ON DELETE CASCADE,
        model_id INTEGER NOT NULL REFERENCES models(id) ON DELETE CASCADE,
        reward_model TEXT NOT NULL DEFAULT '',
        reward REAL NOT NULL,
        PRIMARY KEY (item_id, model_id, reward_model)
    );
    CREATE TABLE preferences (
        item_id INTEGER NOT NULL REFERENCES items(id) ON DELETE CASCADE,
        model_a INTEGER NOT NULL REFERENCES models(id) ON DELETE CASCADE,
        model_b INTEGER NOT NULL REFERENCES models(id) ON DELETE CASCADE,
        judge TEXT NOT NULL DEFAULT '',
        prob_a REAL NOT NULL CHECK (prob_a >= 0 AND prob_a <= 1),
        PRIMARY KEY (item_id, model_a, model_b, judge)
    );
    CREATE TABLE imports (
        id INTEGER PRIMARY KEY,
        benchmark_id INTEGER NOT NULL REFERENCES benchmarks(id) ON DELETE CASCADE,
        format TEXT NOT NULL,
        source TEXT NOT NULL,
        sha256 TEXT NOT NULL,
        counts TEXT NOT NULL DEFAULT '{}',
        replaced INTEGER NOT NULL DEFAULT 0,
        at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now'))
    );
    CREATE TABLE truth (
        benchmark_id INTEGER NOT NULL REFERENCES benchmarks(id) ON DELETE CASCADE,
        entity TEXT NOT NULL CHECK (entity IN ('item', 'model', 'cell', 'benchmark')),
        key TEXT NOT NULL,
        name TEXT NOT NULL,
        value REAL,
        PRIMARY KEY (benchmark_id, entity, key, name)
    );
    CREATE TABLE runs (
        id INTEGER PRIMARY KEY,
        kind TEXT NOT NULL,
        benchmark_id INTEGER REFERENCES benchmarks(id) ON DELETE CASCADE,
        label TEXT NOT NULL DEFAULT '',
        config TEXT NOT NULL DEFAULT '{}',
        seed INTEGER,
        status TEXT NOT NULL DEFAULT 'running' CHECK (status IN ('running', 'done', 'failed', 'cancelled')),
        metrics TEXT NOT NULL DEFAULT '{}',
        timings TEXT NOT NULL DEFAULT '{}',
        code_version TEXT NOT NULL DEFAULT '',
        input_fingerprint TEXT NOT NULL DEFAULT '',
        error TEXT NOT NULL DEFAULT '',
        created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now')),
        finished_at TEXT
    );
    CREATE TABLE run_inputs (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        benchmark_id INTEGER NOT NULL REFERENCES benchmarks(id) ON DELETE CASCADE,
        role TEXT NOT NULL,
        PRIMARY KEY (run_id, benchmark_id, role)
    );
    CREATE TABLE run_models (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        model_id INTEGER NOT NULL REFERENCES models(id) ON DELETE CASCADE,
        theta REAL, se REAL, lo REAL, hi REAL,
        rank INTEGER, rank_lo INTEGER, rank_hi INTEGER,
        extra TEXT NOT NULL DEFAULT '{}',
        PRIMARY KEY (run_id, model_id)
    );
    CREATE TABLE run_items (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        item_id INTEGER NOT NULL REFERENCES items(id) ON DELETE CASCADE,
        difficulty REAL, sharpness REAL, fisher REAL, dif_range REAL,
        extra TEXT NOT NULL DEFAULT '{}',
        PRIMARY KEY (run_id, item_id)
    );
    CREATE TABLE run_artifacts (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        name TEXT NOT NULL,
        format TEXT NOT NULL CHECK (format IN ('json', 'npz', 'text')),
        data BLOB NOT NULL,
        PRIMARY KEY (run_id, name)
    );
    CREATE TABLE flags (
        id INTEGER PRIMARY KEY,
        run_id INTEGER REFERENCES runs(id) ON DELETE CASCADE,
        kind TEXT NOT NULL CHECK (kind IN ('anomaly', 'reversal', 'gap', 'candidate')),
        benchmark_id INTEGER REFERENCES benchmarks(id) ON DELETE CASCADE,
        item_id INTEGER REFERENCES items(id) ON DELETE CASCADE,
        model_id INTEGER REFERENCES models(id) ON DELETE CASCADE,
        model_b_id INTEGER REFERENCES models(id) ON DELETE CASCADE,
        score REAL,
        payload TEXT NOT NULL DEFAULT '{}',
        state TEXT NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'confirmed', 'dismissed', 'unsure')),
        note TEXT NOT NULL DEFAULT '',
        updated_at TEXT
    );
    CREATE INDEX flags_by_run ON flags (run_id, kind, state);
    CREATE TABLE fill_sessions (
        id INTEGER PRIMARY KEY,
        benchmark_id INTEGER NOT NULL REFERENCES benchmarks(id) ON DELETE CASCADE,
        gap_lo REAL NOT NULL, gap_hi REAL NOT NULL, target REAL NOT NULL,
        config TEXT NOT NULL DEFAULT '{}',
        state TEXT NOT NULL DEFAULT 'running',
        message TEXT NOT NULL DEFAULT '',
        created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now')),
        updated_at TEXT
    );
    CREATE TABLE fill_events (
        id INTEGER PRIMARY KEY,
        session_id INTEGER NOT NULL REFERENCES fill_sessions(id) ON DELETE CASCADE,
        round INTEGER,
        kind TEXT NOT NULL,
        payload TEXT NOT NULL DEFAULT '{}',
        at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%f', 'now'))
    );
    CREATE INDEX fill_events_by_session ON fill_events (session_id, id);
    CREATE TABLE fill_candidates (
        id INTEGER PRIMARY KEY,
        session_id INTEGER NOT NULL REFERENCES fill_sessions(id) ON DELETE CASCADE,
        child_key TEXT NOT NULL,
        round INTEGER NOT NULL,
        parent_item_id INTEGER REFERENCES items(id) ON DELETE SET NULL,
        text TEXT NOT NULL,
        answer TEXT NOT NULL DEFAULT '',
        valid INTEGER,
        verdict TEXT NOT NULL DEFAULT '',
        difficulty_raw REAL,
        difficulty_norm REAL,
        distance REAL,
        payload TEXT NOT NULL DEFAULT '{}',
        review_state TEXT NOT NULL DEFAULT 'pending'
            CHECK (review_state IN ('pending', 'accepted', 'rejected', 'waiting')),
        note TEXT NOT NULL DEFAULT '',
        item_id INTEGER REFERENCES items(id) ON DELETE SET NULL,
        decided_at TEXT,
        UNIQUE (session_id, child_key)
    );
    CREATE TABLE llm_calls (
        id INTEGER PRIMARY KEY,
        session_id INTEGER REFERENCES fill_sessions(id) ON DELETE CASCADE,
        role TEXT NOT NULL,
        base_url TEXT NOT NULL DEFAULT '',
        model TEXT NOT NULL DEFAULT '',
        prompt TEXT NOT NULL DEFAULT '',
        response TEXT NOT NULL DEFAULT '',
        latency_s REAL,
        prompt_tokens INTEGER,
        completion_tokens INTEGER,
        status TEXT NOT NULL DEFAULT '',
        error TEXT NOT NULL DEFAULT '',
        at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%f', 'now'))
    );
    CREATE TABLE audit_log (
        id INTEGER PRIMARY KEY,
        at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%f', 'now')),
        actor TEXT NOT NULL DEFAULT '',
        action TEXT NOT NULL,
        entity TEXT NOT NULL,
        entity_id INTEGER,
        detail TEXT NOT NULL DEFAULT '{}',
        note TEXT NOT NULL DEFAULT ''
    );
    CREATE TABLE settings (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL
    );
    """,
    # hardening-runs (issue 10 #3, #5): who runs a run or a BenchFill session (runner = pid, host, process start,
    # token as JSON; heartbeat = unix time), and the run status 'interrupted' (its runner died without finishing).
    # SQLite cannot alter a CHECK in place: the documented writable_schema edit widens it (no row changes), and
    # the ADD COLUMN after it bumps the schema cookie so every open connection reloads the schema.
    """
    ALTER TABLE runs ADD COLUMN runner TEXT NOT NULL DEFAULT '{}';
    ALTER TABLE runs ADD COLUMN heartbeat REAL;
    PRAGMA writable_schema = ON;
    UPDATE sqlite_master SET sql = replace(sql, '''failed'', ''cancelled'')',
                                           '''failed'', ''cancelled'', ''interrupted'')')
        WHERE type = 'table' AND name = 'runs';
    PRAGMA writable_schema = OFF;
    ALTER TABLE fill_sessions ADD COLUMN runner TEXT NOT NULL DEFAULT '{}';
    ALTER TABLE fill_sessions ADD COLUMN heartbeat REAL;
    """,
    # search (issue 16 #5): a full-text index over every item's words, kept in step by triggers so every writer
    # (importers, derive, BenchFill accept, edits, deletes, a benchmark's rename) stays searchable without code of
    # its own. The FTS5 table keeps its own copy of the text (snippets need it; external content cannot hold the
    # benchmark name or the metadata's values). rowid = items.id; status and origin are read from items at query
    # time, so retiring an item needs no re-index. OR REPLACE: an INSERT OR REPLACE into items deletes the old row
    # without its DELETE trigger, and a later item may get that id back. Existing items are indexed here.
    f"""
    CREATE VIRTUAL TABLE items_fts USING fts5(
        benchmark, key, text, answer, grp, metadata, tokenize = 'unicode61 remove_diacritics 2'
    );
    CREATE TRIGGER items_fts_insert AFTER INSERT ON items BEGIN
        INSERT OR REPLACE INTO items_fts (rowid, benchmark, key, text, answer, grp, metadata)
        VALUES (new.id, (SELECT name FROM benchmarks WHERE id = new.benchmark_id), new.key, new.text, new.answer,
                new.grp, {_META_WORDS.format(m="new.metadata")});
    END;
    CREATE TRIGGER items_fts_delete AFTER DELETE ON items BEGIN
        DELETE FROM items_fts WHERE rowid = old.id;
    END;
    CREATE TRIGGER items_fts_update AFTER UPDATE OF id, benchmark_id, key, text, answer, grp, metadata ON items BEGIN
        DELETE FROM items_fts WHERE rowid = old.id;
        INSERT OR REPLACE INTO items_fts (rowid, benchmark, key, text, answer, grp, metadata)
        VALUES (new.id, (SELECT name FROM benchmarks WHERE id = new.benchmark_id), new.key, new.text, new.answer,
                new.grp, {_META_WORDS.format(m="new.metadata")});
    END;
    CREATE TRIGGER items_fts_benchmark_name AFTER UPDATE OF name ON benchmarks BEGIN
        UPDATE items_fts SET benchmark = new.name WHERE rowid IN (SELECT id FROM items WHERE benchmark_id = new.id);
    END;
    INSERT INTO items_fts (rowid, benchmark, key, text, answer, grp, metadata)
        SELECT i.id, b.name, i.key, i.text, i.answer, i.grp, {_META_WORDS.format(m="i.metadata")}
        FROM items i JOIN benchmarks b ON b.id = i.benchmark_id;
    """,
    # curators (issue 25): several curators on one database. A flag and a BenchFill proposal carry a version
    # (every write adds 1, in the write's transaction) and who wrote it last, so a decision names the state it
    # was made on and is refused when that changed (optimistic concurrency: store/curation.py, store/fill.py).
    # Existing rows get the number of audited decisions on them and the actor of the latest, so the audit log
    # replayed from empty still ends at each row's version. A proposal under review is held by a lease
    # (fill_reviews: holder, runner, heartbeat; expired when its heartbeat is older than the lease); a session
    # that needs N approvals records each approver once (fill_approvals).
    """
    CREATE INDEX audit_by_entity ON audit_log (entity, entity_id, id);
    ALTER TABLE flags ADD COLUMN version INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE flags ADD COLUMN updated_by TEXT NOT NULL DEFAULT '';
    UPDATE flags SET
        version = (SELECT count(*) FROM audit_log a WHERE a.entity = 'flag' AND a.entity_id = flags.id),
        updated_by = coalesce((SELECT a.actor FROM audit_log a WHERE a.entity = 'flag' AND a.entity_id = flags.id
                               ORDER BY a.id DESC LIMIT 1), '');
    ALTER TABLE fill_candidates ADD COLUMN version INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE fill_candidates ADD COLUMN decided_by TEXT NOT NULL DEFAULT '';
    UPDATE fill_candidates SET
        version = (SELECT count(*) FROM audit_log a WHERE a.entity = 'fill_candidate'
                   AND a.entity_id = fill_candidates.id),
        decided_by = coalesce((SELECT a.actor FROM audit_log a WHERE a.entity = 'fill_candidate'
                               AND a.entity_id = fill_candidates.id ORDER BY a.id DESC LIMIT 1), '');
    CREATE TABLE fill_reviews (
        candidate_id INTEGER PRIMARY KEY REFERENCES fill_candidates(id) ON DELETE CASCADE,
        holder TEXT NOT NULL,
        runner TEXT NOT NULL DEFAULT '{}',
        since REAL NOT NULL,
        heartbeat REAL NOT NULL
    );
    CREATE TABLE fill_approvals (
        candidate_id INTEGER NOT NULL REFERENCES fill_candidates(id) ON DELETE CASCADE,
        actor TEXT NOT NULL,
        note TEXT NOT NULL DEFAULT '',
        at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%f', 'now')),
        PRIMARY KEY (candidate_id, actor)
    );
    """,
    # broken items (issue 33): the item audit writes flags of kind 'item' with a reason (backwards, miskeyed,
    # dead, saturated, flat, misfit, duplicate; several joined by ',' with the most serious first); the CHECK is
    # widened by the same writable_schema edit as migration 2 (no row changes). The column on flags is added
    # before the edit: an ADD COLUMN after it would splice at the pre-edit length; the ADD COLUMN on items after
    # it bumps the schema cookie. An item's ``choices`` are its option labels (JSON list, '[]' when unknown); a
    # static result row may carry ``options``: the chosen option per cell, int8 aligned with items.pos, the
    # index into that item's choices, -1 where unknown. With options stored, a changed answer re-scores them.
    """
    ALTER TABLE flags ADD COLUMN reason TEXT NOT NULL DEFAULT '';
    PRAGMA writable_schema = ON;
    UPDATE sqlite_master SET sql = replace(sql, '''gap'', ''candidate'')', '''gap'', ''candidate'', ''item'')')
        WHERE type = 'table' AND name = 'flags';
    PRAGMA writable_schema = OFF;
    ALTER TABLE items ADD COLUMN choices TEXT NOT NULL DEFAULT '[]';
    ALTER TABLE static_results ADD COLUMN options BLOB;
    """,
]

SCHEMA_VERSION = len(MIGRATIONS)
