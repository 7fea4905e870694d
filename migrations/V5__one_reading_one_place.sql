-- One reading, one place: a reading is never both in `readings` and unresolved in `quarantine`.
--
-- A reading quarantined as future_timestamp keeps that outcome: its resends are duplicates even
-- once its timestamp is no longer ahead of the daemon's clock. The writer looks for such an
-- entry before inserting a staged reading; this partial index keeps that look-up to the few
-- future_timestamp entries, however many collisions the table holds.
CREATE INDEX quarantine_future_key ON quarantine (turbine_id, recorded_at)
    WHERE reason = 'future_timestamp';

-- What a resolution did to `readings`, so the tables reconcile with the counters:
--   rows in readings = galewatch_readings_inserted_total + resolutions with effect 'added'
-- ('added': kept incoming where no reading had the key; 'replaced': kept incoming over the stored
-- reading; 'none': kept existing, nothing changed).
-- The default fits a 'keep existing' resolution written by hand; one keeping the incoming
-- reading must say which it did (the CHECK refuses 'none' for it).
ALTER TABLE quarantine_resolution
    ADD COLUMN effect text NOT NULL DEFAULT 'none' CHECK (effect IN ('none', 'added', 'replaced'));
UPDATE quarantine_resolution r
   SET effect = CASE WHEN q.reason = 'future_timestamp' THEN 'added' ELSE 'replaced' END
  FROM quarantine q
 WHERE q.id = r.quarantine_id AND r.choice = 'incoming';
ALTER TABLE quarantine_resolution ADD CONSTRAINT quarantine_resolution_effect_fits_choice
    CHECK ((choice = 'existing') = (effect = 'none'));

-- Entries the earlier rule left in two places (a future_timestamp reading whose resend was later
-- inserted): settle them, since the reading is already stored exactly as quarantined.
INSERT INTO quarantine_resolution (quarantine_id, choice, resolved_by, note, effect)
SELECT q.id, 'existing', 'galewatch', 'V5: this exact reading was already in readings', 'none'
  FROM quarantine q
  JOIN readings r ON r.turbine_id = q.turbine_id AND r.recorded_at = q.recorded_at
       AND r.power_kw = q.power_kw
       AND r.wind_speed_ms IS NOT DISTINCT FROM q.wind_speed_ms
       AND r.rotor_rpm IS NOT DISTINCT FROM q.rotor_rpm
 WHERE q.reason = 'future_timestamp'
   AND NOT EXISTS (SELECT 1 FROM quarantine_resolution x WHERE x.quarantine_id = q.id);
