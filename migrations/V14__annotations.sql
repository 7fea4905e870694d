-- Annotations (docs/stats.md "Annotations"): what an operator knows of a period that the data
-- cannot show (a maintenance visit, icing, a sensor replaced), on one turbine or the turbines of
-- a prefix, one signal of them or all (signal ''), with a reason and optionally an IEC
-- 61400-26-1 category (category ''). The flags mark the intervals they cover `excluded`, the
-- power curve leaves them out. One period is stored once: importing a file twice adds nothing.
CREATE TABLE annotations (
    id          bigserial PRIMARY KEY,
    turbine_id  text NOT NULL,
    is_prefix   boolean NOT NULL DEFAULT false,
    signal      text NOT NULL DEFAULT '',
    starts_at   timestamptz NOT NULL,
    ends_at     timestamptz NOT NULL,
    category    text NOT NULL DEFAULT '',
    reason      text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    CHECK (ends_at > starts_at),
    UNIQUE (turbine_id, is_prefix, signal, starts_at, ends_at, category, reason)
);
CREATE INDEX annotations_by_time ON annotations (starts_at, ends_at);
