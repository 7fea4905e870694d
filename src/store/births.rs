//! Sparkplug B birth certificates in `sparkplug_births` (V10): written in the transaction that
//! holds the birth message's outcome, read back when a DATA message arrives for a node or device
//! whose birth this daemon has not seen (after a restart, or when another member of the share
//! group took the birth).

use chrono::{DateTime, Utc};
use tokio_postgres::{Client, Transaction};

use crate::db::Database;
use crate::error::Error;
use crate::sparkplug::{Birth, Known};

const UPSERT: &str = "INSERT INTO sparkplug_births
        (group_id, edge_node, device, aliases, names, datatypes, born_at, received_at)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
    ON CONFLICT (group_id, edge_node, device) DO UPDATE
       SET aliases = excluded.aliases, names = excluded.names, datatypes = excluded.datatypes,
           born_at = excluded.born_at, received_at = excluded.received_at";

const SELECT: &str = "SELECT aliases, names, datatypes, born_at FROM sparkplug_births
    WHERE group_id = $1 AND edge_node = $2 AND device = $3";

/// Stores births, in arrival order: a later birth of the same node or device replaces an
/// earlier one. Batches holding births of the same node or device commit in arrival order
/// (`overlap.rs`), so the stored one is the last to arrive.
pub(crate) async fn record(
    tx: &Transaction<'_>,
    births: &[(&Birth, DateTime<Utc>)],
) -> Result<(), Error> {
    for (b, received_at) in births {
        tx.execute(
            UPSERT,
            &[
                &b.group,
                &b.node,
                &b.device,
                &b.aliases,
                &b.names,
                &b.datatypes,
                &b.born_at,
                received_at,
            ],
        )
        .await
        .map_err(|e| Error::db("storing a Sparkplug B birth", e))?;
    }
    Ok(())
}

/// Reads the stored birth of a node (`device` empty) or device.
pub async fn load(
    client: &Client,
    group: &str,
    node: &str,
    device: &str,
) -> Result<Option<Birth>, Error> {
    let row = client
        .query_opt(SELECT, &[&group, &node, &device])
        .await
        .map_err(|e| Error::db("reading a Sparkplug B birth", e))?;
    Ok(row.map(|r| Birth {
        group: group.to_string(),
        node: node.to_string(),
        device: device.to_string(),
        aliases: r.get(0),
        names: r.get(1),
        datatypes: r.get(2),
        born_at: r.get(3),
    }))
}

/// The subscriber's own connection for reading births, made when first needed and made again
/// after an error.
pub struct Store {
    db: Database,
    client: Option<Client>,
}

impl Store {
    pub fn new(db: Database) -> Store {
        Store { db, client: None }
    }

    /// Drops the connection (after a timeout: it may hang).
    pub fn reset(&mut self) {
        self.client = None;
    }

    /// The stored birth's aliases, or None when none is stored.
    pub async fn known(
        &mut self,
        group: &str,
        node: &str,
        device: &str,
    ) -> Result<Option<Known>, Error> {
        if self.client.as_ref().is_none_or(Client::is_closed) {
            let client = self
                .db
                .connect()
                .await
                .map_err(|e| Error::db("connecting to read Sparkplug B births", e))?;
            self.client = Some(client);
        }
        let client = self.client.as_ref().expect("connected above");
        match load(client, group, node, device).await {
            Ok(b) => Ok(b.as_ref().map(Birth::known)),
            Err(e) => {
                self.client = None;
                Err(e)
            }
        }
    }
}
