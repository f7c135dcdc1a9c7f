-- Instance rows stand for external worker processes too (the pull protocol), and the console
-- shows what each instance takes: its kind, and the queues and job types it asked for
-- (JSON arrays; NULL = all of them).
ALTER TABLE instances ADD COLUMN kind TEXT NOT NULL DEFAULT 'engine';
ALTER TABLE instances ADD COLUMN queues TEXT;
ALTER TABLE instances ADD COLUMN job_types TEXT;
