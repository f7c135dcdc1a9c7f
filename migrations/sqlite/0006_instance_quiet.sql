-- An operator can quiet an instance: it stops claiming new jobs and finishes what it runs and
-- holds in its buffer. The flag lives on the instance row, not in the process, so every
-- console can set it for any instance and the instance learns it at its next heartbeat (which
-- never writes this column, so a beat cannot undo an operator's choice).
ALTER TABLE instances ADD COLUMN quiet INTEGER NOT NULL DEFAULT 0;
