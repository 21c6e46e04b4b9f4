-- baton's work queue, version 1: work units, the packages they pin, workers, and the durable
-- writes of leased units. Applied by `baton queue init` inside one transaction.

CREATE TABLE baton.packages (
    -- sha256 of the stored bytes, computed by baton when the package is put: a unit pins its
    -- package by content, so editing a package never changes queued work.
    sha256      text PRIMARY KEY CHECK (sha256 ~ '^[0-9a-f]{64}$'),
    name        text NOT NULL,
    version     text NOT NULL,
    bytes       bytea NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE baton.work_units (
    id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind              text NOT NULL CHECK (kind IN ('run', 'story')),
    queue             text NOT NULL,
    state             text NOT NULL DEFAULT 'queued'
                      CHECK (state IN ('queued', 'leased', 'waiting', 'done', 'failed', 'cancelled')),
    payload           jsonb NOT NULL DEFAULT '{}'::jsonb,
    package_sha256    text REFERENCES baton.packages (sha256),
    project_remote    text NOT NULL,
    base_commit       text NOT NULL,
    -- The worker holding the lease while leased; afterwards the last one that held it.
    owner             text,
    -- Fencing token: bumped by every claim. A write carries (id, epoch, owner) and is refused
    -- once another claim has bumped it.
    epoch             bigint NOT NULL DEFAULT 0,
    leased_at         timestamptz,
    lease_expires_at  timestamptz,
    heartbeat_at      timestamptz,
    -- Claims take the oldest ready unit first; a unit taken back from an expired lease or
    -- answered by a person keeps its place.
    ready_at          timestamptz NOT NULL DEFAULT now(),
    attempts          integer NOT NULL DEFAULT 0,
    max_attempts      integer CHECK (max_attempts IS NULL OR max_attempts > 0),
    -- What a person is asked while waiting; the outcome once done or failed.
    question          jsonb,
    outcome           jsonb,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    finished_at       timestamptz,
    CHECK (state <> 'leased' OR (owner IS NOT NULL AND lease_expires_at IS NOT NULL))
);

-- Claims read only queued units, oldest ready first, per queue. The order (ready_at, id) is
-- one the primary key cannot give, so the planner never walks the primary key past every
-- claimed unit (which made claims slower with each claim on fresh statistics).
CREATE INDEX work_units_ready ON baton.work_units (queue, ready_at, id) WHERE state = 'queued';
-- The expiry sweep reads only leased units.
CREATE INDEX work_units_leased ON baton.work_units (lease_expires_at) WHERE state = 'leased';

CREATE TABLE baton.workers (
    id                 text PRIMARY KEY,
    host               text NOT NULL,
    started_at         timestamptz NOT NULL DEFAULT now(),
    last_heartbeat_at  timestamptz NOT NULL DEFAULT now()
);

-- Every durable write of a leased unit, appended in the transaction that checked its lease.
CREATE TABLE baton.unit_writes (
    seq         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    unit_id     bigint NOT NULL REFERENCES baton.work_units (id) ON DELETE CASCADE,
    epoch       bigint NOT NULL,
    kind        text NOT NULL,
    body        jsonb NOT NULL,
    written_at  timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX unit_writes_unit ON baton.unit_writes (unit_id, seq);
