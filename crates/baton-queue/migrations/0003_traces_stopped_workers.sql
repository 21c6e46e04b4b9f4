-- baton's work queue, version 3: recorded model traces pinned by content (a run submitted with
-- --replay carries its trace), and workers that stopped kept with when they stopped, so the
-- status can say which worker left and when instead of forgetting it.

CREATE TABLE baton.traces (
    -- sha256 of the stored bytes: a unit names its trace by content, as it names its package.
    sha256      text PRIMARY KEY CHECK (sha256 ~ '^[0-9a-f]{64}$'),
    -- The trace's file name as submitted (shown; no path of the submitter's machine).
    name        text NOT NULL,
    bytes       bytea NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- NULL while the worker runs; set when it stops cleanly (a killed worker keeps NULL and its
-- heartbeat grows old).
ALTER TABLE baton.workers ADD COLUMN stopped_at timestamptz;
