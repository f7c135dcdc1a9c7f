-- Every SQLite index entry already ends in the row's rowid. The list indexes of 0001 and
-- 0002 ended in the 36-character text id as well, only to break ties in the console's
-- keyset pages; the rowid breaks them as well (in insertion order) at no extra cost.
-- Each finished job writes an entry into four of these indexes and each enqueue into one,
-- so the shorter entries cut what a drain writes per job: ~10 % less writer time per job
-- in a bare-SQLite model of claim + archive + delete + commit (12.3 -> 11.1 µs).
-- The claim index keeps its id: claims hand jobs out by id among equals, on both stores.
DROP INDEX archive_finished;
DROP INDEX archive_queue_finished;
DROP INDEX archive_type_finished;
DROP INDEX archive_created;
CREATE INDEX archive_finished ON archive (finished_at);
CREATE INDEX archive_queue_finished ON archive (queue, finished_at);
CREATE INDEX archive_type_finished ON archive (job_type, finished_at);
CREATE INDEX archive_created ON archive (created_at);

DROP INDEX dlq_finished;
DROP INDEX dlq_queue_finished;
DROP INDEX dlq_type_finished;
DROP INDEX dlq_reason_finished;
DROP INDEX dlq_created;
CREATE INDEX dlq_finished ON dlq (finished_at);
CREATE INDEX dlq_queue_finished ON dlq (queue, finished_at);
CREATE INDEX dlq_type_finished ON dlq (job_type, finished_at);
CREATE INDEX dlq_reason_finished ON dlq (reason, finished_at);
CREATE INDEX dlq_created ON dlq (created_at);

DROP INDEX jobs_created;
CREATE INDEX jobs_created ON jobs (created_at);
