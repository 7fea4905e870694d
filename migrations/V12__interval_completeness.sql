-- Completeness (docs/stats.md): per interval, the readings a complete one holds under the sample
-- period declared when it was last written (`sample_period`, `sample_period_overrides`), beside
-- the readings it holds. NULL where no period was declared (then completeness is not known).
-- The signals' own new columns (an implausible count per numeric signal, the mean sine and
-- cosine of an angle signal) are added by `galewatch migrate` for the declared signals, as the
-- others are.
ALTER TABLE interval_stats ADD COLUMN expected double precision;
