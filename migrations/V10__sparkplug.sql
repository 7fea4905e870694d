-- Sparkplug B (src/pipeline/sparkplug/, README "Sparkplug B").
--
-- A DATA message names its metrics by the numeric aliases its node's or device's last birth
-- certificate (NBIRTH/DBIRTH) gave them. The birth is stored here, in the transaction that holds
-- the birth message's outcome, so a restarted daemon, or another member of the share group, can
-- decode the next DATA message. One row per node (device '') or device, replaced whole by the
-- next birth: three parallel arrays in the birth's order.
CREATE TABLE sparkplug_births (
    group_id    text        NOT NULL,
    edge_node   text        NOT NULL,
    device      text        NOT NULL,
    aliases     bigint[]    NOT NULL,
    names       text[]      NOT NULL,
    datatypes   int4[]      NOT NULL,
    -- The birth payload's own timestamp (the edge node's clock), when it had one.
    born_at     timestamptz,
    received_at timestamptz NOT NULL,
    PRIMARY KEY (group_id, edge_node, device),
    CHECK (cardinality(aliases) = cardinality(names) AND cardinality(names) = cardinality(datatypes))
);

-- A DATA message whose alias no stored birth explains is rejected with its own reason.
ALTER TABLE rejected DROP CONSTRAINT rejected_reason_check;
ALTER TABLE rejected ADD CONSTRAINT rejected_reason_check
    CHECK (reason IN ('malformed', 'invalid_value', 'identity_mismatch', 'too_large', 'unknown_alias'));
