-- The Deck schema, version 3: instance rows stand for external worker processes too (the
-- pull protocol), and the console shows what each instance takes: its kind, and the queues
-- and job types it asked for (JSON arrays; NULL = all of them). The conventions of 0001 hold.
--
-- Only adds columns, and no statement of this batch names them (a statement naming a column
-- added earlier in the same batch does not compile). Older processes keep working: they
-- neither write nor read the new columns, and the default marks their rows as engines.
ALTER TABLE [{schema}].[instances] ADD
    [kind]      NVARCHAR(16)  NOT NULL CONSTRAINT [DF_instances_kind] DEFAULT (N'engine');
ALTER TABLE [{schema}].[instances] ADD
    [queues]    NVARCHAR(MAX) NULL;
ALTER TABLE [{schema}].[instances] ADD
    [job_types] NVARCHAR(MAX) NULL;
