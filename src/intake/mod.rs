//! The intake: custody of a message from PUBLISH until the transaction holding its outcome
//! commits. [`subscribe`] takes it from the broker and has its format judge it ([`json`], or
//! [`sparkplug`] for Sparkplug B), [`batch`] gathers the results, and [`ledger`] holds each
//! message's acknowledgement until its batch has committed; [`leave`] hands a share group's
//! session back; [`broker`] checks the connection's settings, [`failover`] picks the broker of a list to connect
//! to next, and [`standby`] keeps a session on every independent broker of the list. It does not speak SQL: what it needs of the database is passed in.

pub(crate) mod alive;
pub mod batch;
pub mod broker;
pub mod connect;
pub mod failover;
pub mod format;
pub mod json;
pub mod leave;
pub mod ledger;
pub mod link;
pub mod sparkplug;
pub mod standby;
pub mod subscribe;
