//! The pipeline, one file a stage, in the order a message goes through it: [`subscribe`] takes it
//! from the broker, [`decode`] turns it into readings (finding each field by [`shape`], reading times with [`timestamp`]), or
//! [`sparkplug`] when it is Sparkplug B, [`batch`] gathers
//! them, [`write`] lands each batch (one attempt is [`transaction`], judged by [`classify`]; batches
//! sharing a key keep their order across writers by [`overlap`]), and
//! [`ledger`] holds custody of the message from PUBLISH to PUBACK.

pub mod batch;
pub mod classify;
pub mod decode;
pub mod leave;
pub mod ledger;
pub mod overlap;
pub mod reading;
pub mod shape;
pub mod sparkplug;
pub mod subscribe;
pub mod timestamp;
pub mod transaction;
pub mod write;
