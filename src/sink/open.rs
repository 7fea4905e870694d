//! A batch's transaction whose BEGIN travels with its first statement instead of waiting for an
//! answer of its own: one round trip a batch fewer than tokio-postgres's `Transaction`.
//!
//! tokio-postgres sends a request as soon as its future is first polled and answers requests in
//! the order they were sent, so BEGIN polled before the COPY goes out ahead of it in the same
//! flight. Only the COPY into the staging table rides with BEGIN: were BEGIN ever refused, the
//! COPY would run on its own and be emptied at its own commit (`ON COMMIT DELETE ROWS`), where
//! another statement could land outside the batch's transaction.

use std::ops::Deref;

use futures_util::FutureExt;
use tokio_postgres::{Client, CopyInSink, Statement};

use crate::error::{DbContext, Error};

/// An open (or about to open) transaction on `client`: rolled back when dropped unless
/// committed, as tokio-postgres's `Transaction` is (the ROLLBACK is sent, not waited for).
pub struct Open<'a> {
    client: &'a Client,
    begun: bool,
    done: bool,
}

impl<'a> Open<'a> {
    /// Nothing is sent yet: BEGIN goes with [`Open::begin_with_copy`] or [`Open::begin`].
    pub fn new(client: &'a Client) -> Self {
        Open {
            client,
            begun: false,
            done: false,
        }
    }

    /// BEGIN and the COPY `copy` in one round trip.
    pub async fn begin_with_copy(
        &mut self,
        copy: &Statement,
    ) -> Result<CopyInSink<bytes::Bytes>, Error> {
        self.begun = true;
        let begin = async {
            self.client
                .batch_execute("BEGIN")
                .await
                .db("beginning a transaction")
        };
        let copy = async { self.client.copy_in(copy).await.db("starting COPY") };
        let ((), sink) = futures_util::future::try_join(begin, copy).await?;
        Ok(sink)
    }

    /// BEGIN alone, waiting for its answer (a batch with nothing to COPY).
    pub async fn begin(&mut self) -> Result<(), Error> {
        self.begun = true;
        self.client
            .batch_execute("BEGIN")
            .await
            .db("beginning a transaction")
    }

    /// COMMIT. Marked done before it is sent, so a COMMIT whose answer never comes is not
    /// followed by a ROLLBACK (the writer asks the database how it ended: `InDoubt`).
    pub async fn commit(mut self) -> Result<(), Error> {
        self.done = true;
        self.client
            .batch_execute("COMMIT")
            .await
            .db("committing a batch")
    }
}

impl Deref for Open<'_> {
    type Target = Client;

    fn deref(&self) -> &Client {
        self.client
    }
}

impl Drop for Open<'_> {
    fn drop(&mut self) {
        if self.begun && !self.done {
            // Polled once: tokio-postgres sends the request on the first poll; its answer is
            // not awaited (the connection drops an answer nobody waits for).
            let _ = self.client.batch_execute("ROLLBACK").now_or_never();
        }
    }
}
