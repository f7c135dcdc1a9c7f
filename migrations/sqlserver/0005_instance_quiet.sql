-- The Deck schema, version 5: an operator can quiet an instance (it stops claiming new jobs
-- and finishes what it runs and holds in its buffer) and resume it. The flag lives on the
-- instance row so any console can set it for any instance; the instance reads it back with its
-- heartbeat, which never writes it, so a beat cannot undo an operator's choice. The
-- conventions of 0001 hold.
--
-- Only adds a column, and no statement of this batch names it (a statement naming a column
-- added earlier in the same batch does not compile). Older processes keep working: they
-- neither write nor read it, and the default leaves every instance claiming.
ALTER TABLE [{schema}].[instances] ADD
    [quiet]     BIT           NOT NULL CONSTRAINT [DF_instances_quiet] DEFAULT (0);
