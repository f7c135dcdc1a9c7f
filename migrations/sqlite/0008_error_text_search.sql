-- Error text search that does not read every row: a trigram full-text index over the last
-- error of each pillar's rows, so "which jobs failed with 'payments gateway'" over a million
-- archived jobs reads the index, not the table. A trigram index answers any substring of
-- three characters or more, case-insensitively, like the LIKE it replaces.
--
-- Only rows that carry an error are indexed (the WHEN clauses): a job that succeeds first
-- time writes nothing here, so the drain's hot path is untouched. Tags are not indexed: in
-- a model of the archive insert, indexing the tags of every row tripled its cost (28 -> 83
-- µs a row); the console scans tags in a bounded window of the newest rows instead.
--
-- The indexes are external-content tables over the pillars' rowids (the text lives once,
-- in the pillar): the triggers keep them in step inside every transaction that moves a row.
-- A VACUUM may renumber rowids; `INSERT INTO <pillar>_errors(<pillar>_errors) VALUES
-- ('rebuild')` would then re-index (The Deck never runs VACUUM).
CREATE VIRTUAL TABLE jobs_errors USING fts5(
    last_error, content = 'jobs', content_rowid = 'rowid', tokenize = 'trigram'
);
CREATE VIRTUAL TABLE archive_errors USING fts5(
    last_error, content = 'archive', content_rowid = 'rowid', tokenize = 'trigram'
);
CREATE VIRTUAL TABLE dlq_errors USING fts5(
    last_error, content = 'dlq', content_rowid = 'rowid', tokenize = 'trigram'
);

CREATE TRIGGER jobs_errors_insert AFTER INSERT ON jobs
WHEN new.last_error IS NOT NULL BEGIN
    INSERT INTO jobs_errors (rowid, last_error) VALUES (new.rowid, new.last_error);
END;
CREATE TRIGGER jobs_errors_delete AFTER DELETE ON jobs
WHEN old.last_error IS NOT NULL BEGIN
    INSERT INTO jobs_errors (jobs_errors, rowid, last_error)
    VALUES ('delete', old.rowid, old.last_error);
END;
CREATE TRIGGER jobs_errors_update_old AFTER UPDATE OF last_error ON jobs
WHEN old.last_error IS NOT NULL BEGIN
    INSERT INTO jobs_errors (jobs_errors, rowid, last_error)
    VALUES ('delete', old.rowid, old.last_error);
END;
CREATE TRIGGER jobs_errors_update_new AFTER UPDATE OF last_error ON jobs
WHEN new.last_error IS NOT NULL BEGIN
    INSERT INTO jobs_errors (rowid, last_error) VALUES (new.rowid, new.last_error);
END;

CREATE TRIGGER archive_errors_insert AFTER INSERT ON archive
WHEN new.last_error IS NOT NULL BEGIN
    INSERT INTO archive_errors (rowid, last_error) VALUES (new.rowid, new.last_error);
END;
CREATE TRIGGER archive_errors_delete AFTER DELETE ON archive
WHEN old.last_error IS NOT NULL BEGIN
    INSERT INTO archive_errors (archive_errors, rowid, last_error)
    VALUES ('delete', old.rowid, old.last_error);
END;
CREATE TRIGGER archive_errors_update_old AFTER UPDATE OF last_error ON archive
WHEN old.last_error IS NOT NULL BEGIN
    INSERT INTO archive_errors (archive_errors, rowid, last_error)
    VALUES ('delete', old.rowid, old.last_error);
END;
CREATE TRIGGER archive_errors_update_new AFTER UPDATE OF last_error ON archive
WHEN new.last_error IS NOT NULL BEGIN
    INSERT INTO archive_errors (rowid, last_error) VALUES (new.rowid, new.last_error);
END;

CREATE TRIGGER dlq_errors_insert AFTER INSERT ON dlq
WHEN new.last_error IS NOT NULL BEGIN
    INSERT INTO dlq_errors (rowid, last_error) VALUES (new.rowid, new.last_error);
END;
CREATE TRIGGER dlq_errors_delete AFTER DELETE ON dlq
WHEN old.last_error IS NOT NULL BEGIN
    INSERT INTO dlq_errors (dlq_errors, rowid, last_error)
    VALUES ('delete', old.rowid, old.last_error);
END;
CREATE TRIGGER dlq_errors_update_old AFTER UPDATE OF last_error ON dlq
WHEN old.last_error IS NOT NULL BEGIN
    INSERT INTO dlq_errors (dlq_errors, rowid, last_error)
    VALUES ('delete', old.rowid, old.last_error);
END;
CREATE TRIGGER dlq_errors_update_new AFTER UPDATE OF last_error ON dlq
WHEN new.last_error IS NOT NULL BEGIN
    INSERT INTO dlq_errors (rowid, last_error) VALUES (new.rowid, new.last_error);
END;

-- The rows already there.
INSERT INTO jobs_errors (rowid, last_error)
    SELECT rowid, last_error FROM jobs WHERE last_error IS NOT NULL;
INSERT INTO archive_errors (rowid, last_error)
    SELECT rowid, last_error FROM archive WHERE last_error IS NOT NULL;
INSERT INTO dlq_errors (rowid, last_error)
    SELECT rowid, last_error FROM dlq WHERE last_error IS NOT NULL;
