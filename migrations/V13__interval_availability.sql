-- Availability (IEC 61400-26-1, docs/stats.md "Availability"): per interval, the readings whose
-- status stood for each of the standard's information categories (each reading stands for its
-- sample period), merged by addition like every other count. NULL where availability was not
-- kept when the interval was written (no `availability_status_signal`): not known. The time
-- with no reading at all is the interval's expected readings less those it holds.
ALTER TABLE interval_stats
    ADD COLUMN avail_full_performance                 bigint,
    ADD COLUMN avail_partial_performance              bigint,
    ADD COLUMN avail_technical_standby                bigint,
    ADD COLUMN avail_out_of_electrical_specification  bigint,
    ADD COLUMN avail_requested_shutdown               bigint,
    ADD COLUMN avail_out_of_environmental_specification bigint,
    ADD COLUMN avail_scheduled_maintenance            bigint,
    ADD COLUMN avail_planned_corrective_action        bigint,
    ADD COLUMN avail_forced_outage                    bigint,
    ADD COLUMN avail_suspended                        bigint,
    ADD COLUMN avail_force_majeure                    bigint,
    ADD COLUMN avail_information_unavailable          bigint;
