-- The console's active-jobs list sorts by creation time by default; without this index a
-- backlog of 100,000 pending jobs was scanned and sorted on every page (~110 ms). Keyset
-- pages now walk the index.
CREATE INDEX jobs_created ON jobs (created_at, id);
