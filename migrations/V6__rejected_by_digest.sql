-- A rejected payload is kept only up to `rejected_payload_keep_bytes` (default 4 KiB), so one
-- broken device cannot fill the disk with whole 1 MiB payloads; what names a rejected message
-- is now the SHA-256 of its whole payload, computed by the daemon before the payload is cut.
ALTER TABLE rejected ADD COLUMN payload_sha256 bytea;

-- Rows from before: their payload is whole (its digest is what the daemon now computes), except
-- a too_large one cut to 64 KiB, whose whole payload is unknown. That one gets a digest of what
-- was kept and its size, distinct from any whole payload's, so the rows stay as distinct as the
-- old index kept them. (A too_large message redelivered across this upgrade is rejected once
-- more: its new digest cannot be matched with the old row.)
UPDATE rejected
   SET payload_sha256 = CASE
       WHEN reason = 'too_large' AND length(payload) < payload_bytes
       THEN sha256(payload || convert_to('/cut/' || payload_bytes, 'UTF8'))
       ELSE sha256(payload)
   END;
ALTER TABLE rejected ALTER COLUMN payload_sha256 SET NOT NULL;
ALTER TABLE rejected ADD CONSTRAINT rejected_payload_sha256_length
    CHECK (octet_length(payload_sha256) = 32);

-- A redelivered message must not add its rejection twice; hashing the digest (32 bytes) is far
-- cheaper than md5 over up to a whole payload.
DROP INDEX rejected_once;
CREATE UNIQUE INDEX rejected_once
    ON rejected (topic, payload_sha256, payload_bytes, coalesce(element, -1));
