//! The seams between intake and sink, closed here: neither imports the other, so what one needs
//! of the other is a trait it declares and the daemon implements with the other's type.

use crate::core::birth::History;
use crate::intake::batch::{Acks, Custody};
use crate::intake::sparkplug::intake::{BirthBook, Reply};
use crate::sink::births::Store;
use crate::sink::write::Settle;

/// The writers hand a committed batch's custody back to the intake's ledger.
impl Settle<Custody> for Acks {
    fn committed(&self, seq: u64, custody: Vec<Custody>) {
        Acks::committed(self, seq, custody);
    }

    fn owed(&self) -> usize {
        Acks::owed(self)
    }

    fn flush(&self) {
        Acks::flush(self);
    }
}

/// The Sparkplug B intake reads births and sequence numbers through the sink's store.
impl BirthBook for Store {
    fn history<'a>(&'a mut self, key: (&'a str, &'a str, &'a str)) -> Reply<'a, History> {
        Box::pin(self.load(key))
    }

    fn last_seq<'a>(&'a mut self, group: &'a str, node: &'a str) -> Reply<'a, Option<u8>> {
        Box::pin(Store::last_seq(self, group, node))
    }

    fn prove(&mut self, conn: i64) -> Reply<'_, u64> {
        Box::pin(Store::prove(self, conn))
    }

    fn reset(&mut self) {
        Store::reset(self);
    }
}
