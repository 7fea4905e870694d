//! The seam for an input format: what a format makes of one message, and the moments of a broker
//! session it may act on. The subscriber knows only this trait; JSON (`json/`) and Sparkplug B
//! (`sparkplug/`) stand behind it, each in its own folder with its own settings group.
//!
//! The rules every format judges values by are in [`judge`]: a format reads its own syntax and
//! leaves the verdict on each value to them.
//!
//! Adding a format: a folder under `intake/` with an impl of [`Format`] (pure judgement apart
//! from I/O, as `json/` and `sparkplug/` do), its settings group validated where it lives, one
//! line in the daemon's list (`daemon::formats`: this seam names none of its formats), and one
//! line in `tests/conformance.rs`, whose cases every format must pass.

use std::fmt::Debug;
use std::future::Future;
use std::pin::Pin;

use chrono::{DateTime, Utc};
use rumqttc::v5::mqttbytes::v5::LastWill;
use rumqttc::v5::AsyncClient;
use tokio_util::sync::CancellationToken;

pub mod judge;

use crate::core::birth::{Birth, SeqMark};
use crate::core::outcome::Decoded;
use crate::intake::format::judge::Limits;

/// One message as it arrived.
#[derive(Debug, Clone, Copy)]
pub struct Incoming<'a> {
    pub topic: &'a str,
    pub payload: &'a [u8],
    /// Delivered before (the broker's DUP flag).
    pub dup: bool,
    /// The daemon's wall clock at receipt.
    pub received_at: DateTime<Utc>,
}

/// What a format may use while it judges: the limits every format shares (and the declared
/// signals), the broker client (to ask an edge node to rebirth), and the shutdown to give up on.
pub struct Context<'a> {
    pub limits: &'a Limits,
    pub client: &'a AsyncClient,
    pub shutdown: &'a CancellationToken,
}

/// Held by a message until its batch has committed or been abandoned.
pub type Hold = Box<dyn Debug + Send + Sync>;

/// What a format made of one message.
#[derive(Debug, Default)]
pub struct Judgement {
    /// Readings and refusals: at least one, so every message is accounted for, unless the
    /// message holds no reading by its format's rules (a death, a node's own metrics).
    pub items: Vec<Decoded>,
    /// A birth certificate to store in the batch's transaction.
    pub birth: Option<Box<Birth>>,
    /// An edge node's sequence number to store once the batch commits.
    pub seq_mark: Option<SeqMark>,
    /// Held until the batch is done (Sparkplug B reads the database only once none is held).
    pub hold: Option<Hold>,
}

/// A judgement to come: None when shutdown began while the format waited (the message is then
/// left unacknowledged, for the next run).
pub(crate) type Judging<'a> = Pin<Box<dyn Future<Output = Option<Judgement>> + Send + 'a>>;

/// An input format.
pub trait Format: Send {
    /// Whether messages on `topic` are this format's (the default format takes the rest).
    fn claims(&self, topic: &str) -> bool;
    /// The topic filters it subscribes with.
    fn filters(&self) -> Vec<String>;
    /// Judges one message. It must never wait on anything that waits on the subscriber's polling
    /// (see `subscribe.rs`).
    fn judge<'a>(&'a mut self, m: Incoming<'a>, cx: Context<'a>) -> Judging<'a>;
    /// A broker connection was made.
    fn connected(&mut self, _session_present: bool) {}
    /// The subscription holds.
    fn subscribed(&self, _client: &AsyncClient) {}
    /// The will to leave with the broker at CONNECT.
    fn will(&self) -> Option<LastWill> {
        None
    }
    /// A retained message to publish just before a clean DISCONNECT (topic, payload).
    fn farewell(&self) -> Option<(String, Vec<u8>)> {
        None
    }
}

/// The formats of one subscriber: the default (JSON) takes every topic no other claims.
pub(crate) struct Formats {
    default: Box<dyn Format>,
    others: Vec<Box<dyn Format>>,
}

impl Formats {
    /// `default` takes every topic none of `others` claims (the daemon builds the list from the
    /// settings: this seam names none of its formats).
    pub fn new(default: Box<dyn Format>, others: Vec<Box<dyn Format>>) -> Formats {
        Formats { default, others }
    }

    /// The format that takes messages on `topic`.
    pub(crate) fn for_topic(&mut self, topic: &str) -> &mut dyn Format {
        match self.others.iter_mut().find(|f| f.claims(topic)) {
            Some(f) => f.as_mut(),
            None => self.default.as_mut(),
        }
    }

    /// Every format, the default first.
    pub fn iter(&self) -> impl Iterator<Item = &dyn Format> + '_ {
        std::iter::once(self.default.as_ref()).chain(self.others.iter().map(|f| f.as_ref()))
    }

    /// Every format, mutably, the default first.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut (dyn Format + 'static)> + '_ {
        std::iter::once(self.default.as_mut()).chain(self.others.iter_mut().map(|f| f.as_mut()))
    }

    /// The filters subscribed with, the default format's first.
    pub fn filters(&self) -> Vec<String> {
        self.iter().flat_map(|f| f.filters()).collect()
    }
}
