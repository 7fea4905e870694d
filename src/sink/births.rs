//! Sparkplug B birth certificates in `sparkplug_births` (V10, V11): a history per MQTT session,
//! written in the transaction that holds each birth message's outcome, read back when a DATA
//! message arrives for a node or device whose birth this connection has not seen, and proven
//! (older rows pruned) once per connection. Which rows may apply to a message is
//! `intake/sparkplug/host.rs`'s rule; this file only speaks SQL.

use chrono::{DateTime, Utc};
use tokio_postgres::Client;

use crate::core::birth::{Birth, History, SeqMark};
use crate::error::{DbContext, Error};
use crate::sink::db::Database;

const INSERT: &str = "INSERT INTO sparkplug_births
        (session, group_id, edge_node, device, conn, withdrawn, aliases, names, datatypes, born_at, received_at)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)";

/// Rows kept of one node's or device's history: a node alternating between births within one
/// connection (nothing proven meanwhile) cannot grow it further; a history cut short has no
/// proven row, so a redelivered message is then refused rather than decoded (`load`).
const HISTORY: i64 = 16;

/// A node's or device's rows that a message may follow, newest first: this session's, then the
/// rows stored before V11 (session ''), which count as proven and older than any of its own.
/// The caller stops at the first proven row.
const SELECT: &str = "SELECT proven OR session = '', withdrawn, aliases, names, datatypes,
           CASE WHEN session = '' THEN 0 ELSE generation END
      FROM sparkplug_births
     WHERE session IN ($1, '') AND group_id = $2 AND edge_node = $3 AND device = $4
     ORDER BY session = '', generation DESC
     LIMIT $5::int8";

/// The newest withdrawal of a node's own birth (a refused NBIRTH, or a sequence gap: a message
/// of the node was lost, maybe a birth): its devices' births stored before it no longer apply.
const NODE_WITHDRAWN: &str = "SELECT max(generation) FROM sparkplug_births
     WHERE session = $1 AND group_id = $2 AND edge_node = $3 AND device = '' AND withdrawn";

/// Drops a node's or device's rows past the newest `HISTORY`.
const TRIM: &str = "DELETE FROM sparkplug_births
     WHERE session = $1 AND group_id = $2 AND edge_node = $3 AND device = $4
       AND generation < (SELECT generation FROM sparkplug_births
                          WHERE session = $1 AND group_id = $2 AND edge_node = $3 AND device = $4
                          ORDER BY generation DESC OFFSET $5::int8 LIMIT 1)";

/// Marks this session's rows of earlier connections proven, then drops the rows no message can
/// follow any more: those older than a proven row of the same node or device.
const PROVE: &str = "UPDATE sparkplug_births SET proven = true
     WHERE session = $1 AND conn <> $2 AND NOT proven";
const PRUNE: &str = "DELETE FROM sparkplug_births b
     WHERE b.session = $1
       AND EXISTS (SELECT 1 FROM sparkplug_births n
                    WHERE n.session = b.session AND n.group_id = b.group_id
                      AND n.edge_node = b.edge_node AND n.device = b.device
                      AND n.proven AND n.generation > b.generation)";

/// Stores each edge node's last sequence number of a committed batch (`position`: its place in
/// arrival order), unless a later batch's is already there.
const MARK_SEQ: &str =
    "INSERT INTO sparkplug_nodes (session, group_id, edge_node, seq, conn, position)
SELECT $1, u.g, u.n, u.s, $5, $6 FROM unnest($2::text[], $3::text[], $4::int4[]) AS u(g, n, s)
ON CONFLICT (session, group_id, edge_node) DO UPDATE
   SET seq = excluded.seq, conn = excluded.conn, position = excluded.position
 WHERE (excluded.conn, excluded.position) > (sparkplug_nodes.conn, sparkplug_nodes.position)";

const LAST_SEQ: &str = "SELECT seq FROM sparkplug_nodes
     WHERE session = $1 AND group_id = $2 AND edge_node = $3";

/// Stores where each edge node's sequence stands after a committed batch (its own transaction:
/// a crash before it only makes the next connection see a gap, which is refused, not guessed).
pub(crate) async fn mark_seq(
    client: &Client,
    session: &str,
    marks: &[&SeqMark],
    position: i64,
) -> Result<(), Error> {
    // The last mark of each node, in arrival order; all of one batch's marks share a connection
    // but for a batch spanning a reconnect, where the newest connection's count wins.
    let mut last: std::collections::HashMap<(&str, &str), &SeqMark> =
        std::collections::HashMap::new();
    for m in marks {
        last.insert((m.group.as_str(), m.node.as_str()), m);
    }
    let Some(conn) = last.values().map(|m| m.conn).max() else {
        return Ok(());
    };
    let kept: Vec<_> = last.values().filter(|m| m.conn == conn).collect();
    let groups: Vec<&str> = kept.iter().map(|m| m.group.as_str()).collect();
    let nodes: Vec<&str> = kept.iter().map(|m| m.node.as_str()).collect();
    let seqs: Vec<i32> = kept.iter().map(|m| i32::from(m.seq)).collect();
    let all = client
        .execute(
            MARK_SEQ,
            &[&session, &groups, &nodes, &seqs, &conn, &position],
        )
        .await
        .db("storing Sparkplug B sequence numbers");
    match all {
        // One node id the database cannot hold (its encoding) must not keep the others' numbers
        // from being stored: one statement each, and the one refused is passed over.
        Err(e) if e.is_caused_by_data() => {
            for i in 0..kept.len() {
                let one = client
                    .execute(
                        MARK_SEQ,
                        &[
                            &session,
                            &&groups[i..=i],
                            &&nodes[i..=i],
                            &&seqs[i..=i],
                            &conn,
                            &position,
                        ],
                    )
                    .await;
                if let Err(e) = one {
                    tracing::debug!(error = %e, "a Sparkplug B sequence number the database refuses");
                }
            }
            Ok(())
        }
        other => other.map(|_| ()),
    }
}

/// A birth to store with its message's time of receipt, for the session (MQTT client id) that
/// received it.
pub(crate) type Born<'a> = (&'a Birth, DateTime<Utc>);

/// Stores births, in arrival order (batches holding births of the same node or device commit in
/// arrival order, `overlap.rs`, so generations follow arrival).
pub(crate) async fn record(tx: &Client, session: &str, births: &[Born<'_>]) -> Result<(), Error> {
    for (b, received_at) in births {
        let names: Vec<&str> = b.names.iter().collect();
        tx.execute(
            INSERT,
            &[
                &session,
                &b.group,
                &b.node,
                &b.device,
                &b.conn,
                &b.withdrawn,
                &b.aliases,
                &names,
                &b.datatypes,
                &b.born_at,
                received_at,
            ],
        )
        .await
        .db("storing a Sparkplug B birth")?;
        tx.execute(
            TRIM,
            &[&session, &b.group, &b.node, &b.device, &(HISTORY - 1)],
        )
        .await
        .db("trimming a Sparkplug B birth history")?;
    }
    Ok(())
}

/// Reads the births of a node or device that a message may follow.
pub async fn load(
    client: &Client,
    session: &str,
    (group, node, device): (&str, &str, &str),
) -> Result<History, Error> {
    let rows = client
        .query(SELECT, &[&session, &group, &node, &device, &HISTORY])
        .await
        .db("reading Sparkplug B births")?;
    let withdrawn_at: Option<i64> = if device.is_empty() {
        None
    } else {
        client
            .query_one(NODE_WITHDRAWN, &[&session, &group, &node])
            .await
            .db("reading Sparkplug B births")?
            .get(0)
    };
    let nothing = History::default();
    // The device's newest birth is older than its node's withdrawal: none applies.
    let newest: Option<i64> = rows.first().map(|r| r.get(5));
    if let (Some(w), Some(n)) = (withdrawn_at, newest) {
        if w > n {
            return Ok(nothing);
        }
    }
    let mut births = Vec::new();
    let mut proven = false;
    // Births a redelivery may follow are missing: older than the node's withdrawal (which cannot
    // be told apart from those after it), or trimmed from a full history.
    let mut cut = rows.len() as i64 >= HISTORY;
    for r in &rows {
        if withdrawn_at.is_some_and(|w| w > r.get::<_, i64>(5)) {
            cut = true;
            break;
        }
        let b = Birth {
            group: group.to_string(),
            node: node.to_string(),
            device: device.to_string(),
            withdrawn: r.get(1),
            aliases: r.get(2),
            names: r.get::<_, Vec<String>>(3).iter().collect(),
            datatypes: r.get(4),
            born_at: None,
            conn: 0,
        };
        births.push(b);
        if r.get::<_, bool>(0) {
            proven = true;
            cut = false;
            break;
        }
    }
    Ok(History {
        births,
        proven,
        cut,
    })
}

/// Marks the rows of this session's earlier connections proven and prunes what they make
/// unreachable (once per connection, from its first newly delivered message).
pub(crate) async fn prove(client: &Client, session: &str, conn: i64) -> Result<u64, Error> {
    client
        .execute(PROVE, &[&session, &conn])
        .await
        .db("proving Sparkplug B births")?;
    client
        .execute(PRUNE, &[&session])
        .await
        .db("pruning Sparkplug B births")
}

/// The subscriber's own connection for reading births, made when first needed and made again
/// after an error.
pub(crate) struct Store {
    db: Database,
    session: String,
    client: Option<Client>,
}

impl Store {
    pub fn new(db: Database, session: String) -> Store {
        Store {
            db,
            session,
            client: None,
        }
    }

    /// Drops the connection (after a timeout: it may hang).
    pub fn reset(&mut self) {
        self.client = None;
    }

    async fn client(&mut self) -> Result<&Client, Error> {
        if self.client.as_ref().is_none_or(Client::is_closed) {
            let client = self
                .db
                .open()
                .await
                .map_err(|e| e.prefixed("reading Sparkplug B births"))?;
            self.client = Some(client);
        }
        Ok(self.client.as_ref().expect("connected above"))
    }

    /// The births of a node or device that a message may follow.
    pub async fn load(&mut self, key: (&str, &str, &str)) -> Result<History, Error> {
        let session = self.session.clone();
        let client = self.client().await?;
        let r = load(client, &session, key).await;
        if r.is_err() {
            self.client = None;
        }
        r
    }

    /// An edge node's last sequence number stored (see [`mark_seq`]).
    pub(crate) async fn last_seq(&mut self, group: &str, node: &str) -> Result<Option<u8>, Error> {
        let session = self.session.clone();
        let client = self.client().await?;
        match client.query_opt(LAST_SEQ, &[&session, &group, &node]).await {
            Ok(row) => Ok(row.map(|r| (r.get::<_, i32>(0) & 0xff) as u8)),
            Err(e) => {
                self.client = None;
                Err(Error::db("reading a Sparkplug B sequence number", e))
            }
        }
    }

    /// Proves this session's earlier connections' births (see [`prove`]).
    pub(crate) async fn prove(&mut self, conn: i64) -> Result<u64, Error> {
        let session = self.session.clone();
        let client = self.client().await?;
        let r = prove(client, &session, conn).await;
        if r.is_err() {
            self.client = None;
        }
        r
    }
}

/// A node's or device's newest stored birth, as `galewatch sparkplug metrics` lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct Stored {
    pub group_id: String,
    pub edge_node: String,
    /// Empty for a node's own birth (NBIRTH).
    pub device: String,
    /// The newest row is a withdrawal: the last birth was refused, none applies until the next.
    pub withdrawn: bool,
    /// (alias, name, data type), in the birth's order.
    pub metrics: Vec<(i64, String, i32)>,
    pub received_at: DateTime<Utc>,
}

/// The newest row of each node and device in `session`'s history (and the rows kept from
/// before V11, shared by every session), in group, node, device order.
const NEWEST: &str = "SELECT DISTINCT ON (group_id, edge_node, device)
           group_id, edge_node, device, withdrawn, aliases, names, datatypes, received_at
      FROM sparkplug_births
     WHERE session IN ($1, '')
     ORDER BY group_id, edge_node, device, session = '', generation DESC";

/// Each node's and device's newest stored birth in `session`'s history.
pub async fn newest(client: &Client, session: &str) -> Result<Vec<Stored>, Error> {
    let rows = client
        .query(NEWEST, &[&session])
        .await
        .db("reading the stored Sparkplug B births")?;
    Ok(rows
        .iter()
        .map(|r| {
            let aliases: Vec<i64> = r.get(4);
            let names: Vec<String> = r.get(5);
            let types: Vec<i32> = r.get(6);
            Stored {
                group_id: r.get(0),
                edge_node: r.get(1),
                device: r.get(2),
                withdrawn: r.get(3),
                metrics: aliases
                    .into_iter()
                    .zip(names)
                    .zip(types)
                    .map(|((a, n), t)| (a, n, t))
                    .collect(),
                received_at: r.get(7),
            }
        })
        .collect())
}
