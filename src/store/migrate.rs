//! Migrate: apply the schema in `migrations/`, in order, tracked in `refinery_schema_history`.
//!
//! Safe to run twice and from several daemons at once: a session advisory lock serialises the
//! runners, and refinery skips what is already applied.

use tokio_postgres::Client;

use crate::error::Error;

refinery::embed_migrations!("migrations");

/// Arbitrary, fixed: the advisory lock key that serialises Galewatch migrations.
const LOCK_KEY: i64 = 0x6761_6c65_7761_7463; // "galewatc"

/// Applies pending migrations; returns the names of those applied now.
pub async fn run(client: &mut Client) -> Result<Vec<String>, Error> {
    run_to(client, None).await
}

/// Applies pending migrations up to and including `version` (all when None). The conversion
/// test and benchmark use it to build a database as an older release left it.
pub async fn run_to(client: &mut Client, version: Option<i32>) -> Result<Vec<String>, Error> {
    client
        .execute("SELECT pg_advisory_lock($1)", &[&LOCK_KEY])
        .await
        .map_err(|e| Error::db("taking the migration lock", e))?;
    let mut runner = migrations::runner();
    if let Some(v) = version {
        runner = runner.set_target(refinery::Target::Version(v));
    }
    let result = runner.run_async(client).await;
    let unlock = client
        .execute("SELECT pg_advisory_unlock($1)", &[&LOCK_KEY])
        .await
        .map_err(|e| Error::db("releasing the migration lock", e));
    let report = result.map_err(|e| Error::other("applying migrations", e))?;
    unlock?;
    Ok(report
        .applied_migrations()
        .iter()
        .map(|m| m.to_string())
        .collect())
}
