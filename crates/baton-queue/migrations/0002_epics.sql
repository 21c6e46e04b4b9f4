-- baton's work queue, version 2: epics run on the queue. The orchestrator of an epic holds a
-- lease of its own (one per project remote and epic), renewed by heartbeat like a unit's; the
-- story units it submits carry the epic and the orchestrator's session in their payload.

CREATE TABLE baton.epic_leases (
    -- "<project remote>#<epic id>"
    epic          text PRIMARY KEY,
    -- The orchestrator process holding it, and where it runs ("<host>:<project folder>"): an
    -- orchestrator started again at the same site (where its own project lock says no other
    -- one lives) takes its lease over at once; from elsewhere only once it expired.
    owner         text NOT NULL,
    site          text NOT NULL,
    -- Bumped by every acquisition: a unit is submitted only under the current one.
    epoch         bigint NOT NULL,
    acquired_at   timestamptz NOT NULL DEFAULT now(),
    heartbeat_at  timestamptz NOT NULL DEFAULT now(),
    expires_at    timestamptz NOT NULL
);

-- An orchestrator started again finds the story units it submitted.
CREATE INDEX work_units_stories ON baton.work_units
    (project_remote, (payload->>'epicId'), (payload->>'session'), id) WHERE kind = 'story';
